package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/controller/client"
	"github.com/kilnhq/kiln/proto"
)

func nodePowerCmd(o *cliOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "power", Short: "Power nodes on, off, or reboot them through their BMC"}
	for _, p := range []struct {
		name       string
		hard, soft proto.PowerState
		final      proto.PowerState
	}{
		{"on", proto.PowerOn, "", proto.PowerOn},
		{"off", proto.PowerOff, proto.PowerSoftOff, proto.PowerOff},
		{"reboot", proto.PowerRebooting, proto.PowerSoftReboot, proto.PowerOn},
	} {
		var w waitFlags
		var soft bool
		var timeout int
		sub := &cobra.Command{
			Use:   p.name + " NODE...",
			Short: "Power nodes " + p.name,
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := o.client()
				if err != nil {
					return err
				}
				req := proto.PowerRequest{Target: p.hard}
				if soft {
					if p.soft == "" {
						return fmt.Errorf("--soft applies to off and reboot only")
					}
					req.Target = p.soft
				}
				if timeout > 0 {
					req.Timeout = &timeout
				}
				var started []string
				err = eachNode(cmd, args, func(ctx context.Context, n string) error {
					if err := c.SetPowerState(ctx, n, req); err != nil {
						return err
					}
					started = append(started, n)
					if !w.wait {
						fmt.Fprintf(cmd.OutOrStdout(), "Requested power %s of node %s\n", p.name, n)
					}
					return nil
				})
				if !w.wait || len(started) == 0 {
					return err
				}
				werr := waitNodes(cmd, c, started, powerGoal(p.final), w.timeout)
				if err != nil {
					return err
				}
				return werr
			},
		}
		w.add(sub)
		if p.soft != "" {
			sub.Flags().BoolVar(&soft, "soft", false, "ask the operating system to shut down (ACPI) instead of cutting power")
		}
		sub.Flags().IntVar(&timeout, "power-timeout", 0, "seconds the BMC may take (soft power off/reboot)")
		cmd.AddCommand(sub)
	}
	return cmd
}

func nodeBootDeviceCmd(o *cliOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "boot-device", Short: "Show or set what a node boots from next"}
	var persistent bool
	set := &cobra.Command{
		Use:   "set NODE DEVICE",
		Short: "Set the boot device: pxe, disk, cdrom, bios or safe",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.SetBootDevice(cmd.Context(), args[0], proto.BootDeviceRequest{BootDevice: args[1], Persistent: persistent}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Requested boot device %s for node %s\n", args[1], args[0])
			return nil
		},
	}
	set.Flags().BoolVar(&persistent, "persistent", false, "keep the device for every boot, not only the next")
	show := &cobra.Command{
		Use:   "show NODE",
		Short: "Show the boot device",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			bd, err := c.GetBootDevice(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.printer(cmd).object(bd)
		},
	}
	cmd.AddCommand(set, show)
	return cmd
}

func nodeMaintenanceCmd(o *cliOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "maintenance", Short: "Put nodes in or take them out of maintenance"}
	var reason string
	set := &cobra.Command{
		Use:   "set NODE...",
		Short: "Put nodes in maintenance: the conductor leaves them alone",
		Args:  cobra.MinimumNArgs(1),
		RunE:  eachArg(o, func(ctx context.Context, c *client.Client, n string) error { return c.SetMaintenance(ctx, n, reason) }, "Node %s is in maintenance"),
	}
	set.Flags().StringVar(&reason, "reason", "", "why (shown as maintenance_reason)")
	unset := &cobra.Command{
		Use:   "unset NODE...",
		Short: "Take nodes out of maintenance",
		Args:  cobra.MinimumNArgs(1),
		RunE:  eachArg(o, func(ctx context.Context, c *client.Client, n string) error { return c.UnsetMaintenance(ctx, n) }, "Node %s is out of maintenance"),
	}
	cmd.AddCommand(set, unset)
	return cmd
}

func nodeHistoryCmd(o *cliOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "history NODE",
		Short: "List a node's events (provision requests, failures), oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			hist, err := c.History(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			rows := make([]row, 0, len(hist))
			for _, h := range hist {
				rows = append(rows, row{"created_at": h.CreatedAt, "severity": h.Severity, "event": h.Event, "uuid": h.UUID})
			}
			return o.printer(cmd).list([]column{{"created_at", "TIME"}, {"severity", "SEVERITY"}, {"event", "EVENT"}, {"uuid", "UUID"}}, rows)
		},
	}
}

func nodeInventoryCmd(o *cliOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "inventory NODE",
		Short: "Show the hardware inventory inspection collected",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			inv, err := c.GetInventory(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			p := o.printer(cmd)
			if p.format != "table" {
				_, err := p.data(inv)
				return err
			}
			var doc proto.Inventory
			if err := json.Unmarshal(inv.Inventory, &doc); err != nil {
				return fmt.Errorf("decode inventory: %w", err)
			}
			return p.object(inventorySummary(doc))
		},
	}
}

// inventorySummary is the table view of an inventory: what an operator
// checks first. The whole document is in -o json / -o yaml.
func inventorySummary(inv proto.Inventory) map[string]any {
	var disks, nics []string
	for _, d := range inv.Disks {
		disks = append(disks, fmt.Sprintf("%s %s %.0f GB %s", d.Name, d.Model, float64(d.Size)/1e9, d.Serial))
	}
	for _, n := range inv.Interfaces {
		nics = append(nics, fmt.Sprintf("%s %s %s", n.Name, n.MACAddress, n.IPv4Address))
	}
	return map[string]any{
		"cpu":        fmt.Sprintf("%s, %d CPUs (%s)", inv.CPU.ModelName, inv.CPU.Count, inv.CPU.Architecture),
		"memory_mb":  inv.Memory.PhysicalMB,
		"system":     fmt.Sprintf("%s %s %s", inv.SystemVendor.Manufacturer, inv.SystemVendor.ProductName, inv.SystemVendor.SerialNumber),
		"boot_mode":  inv.Boot.CurrentBootMode,
		"disks":      disks,
		"interfaces": nics,
	}
}

func newPortCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{Use: "port", Short: "Manage nodes' network ports (MAC addresses)"}
	addClientFlags(cmd, o)
	var node string
	list := &cobra.Command{
		Use:   "list",
		Short: "List ports",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ports, err := c.ListPorts(cmd.Context(), node)
			if err != nil {
				return err
			}
			rows := make([]row, 0, len(ports))
			for _, p := range ports {
				rows = append(rows, row{"uuid": p.UUID, "address": p.Address, "node_uuid": p.NodeUUID, "pxe_enabled": p.PXEEnabled})
			}
			return o.printer(cmd).list([]column{{"uuid", "UUID"}, {"address", "ADDRESS"}, {"node_uuid", "NODE UUID"}, {"pxe_enabled", "PXE"}}, rows)
		},
	}
	list.Flags().StringVar(&node, "node", "", "only the ports of this node (UUID or name)")
	var createNode string
	var pxe bool
	create := &cobra.Command{
		Use:   "create ADDRESS --node NODE",
		Short: "Add a port (a MAC address) to a node",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if createNode == "" {
				return fmt.Errorf("--node is required")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			n, err := c.GetNode(cmd.Context(), createNode)
			if err != nil {
				return err
			}
			p, err := c.CreatePort(cmd.Context(), map[string]any{"address": args[0], "node_uuid": n.UUID, "pxe_enabled": pxe})
			if err != nil {
				return err
			}
			return o.printer(cmd).object(p)
		},
	}
	create.Flags().StringVar(&createNode, "node", "", "the node (UUID or name)")
	create.Flags().BoolVar(&pxe, "pxe-enabled", true, "the node network-boots from this port")
	del := &cobra.Command{
		Use:   "delete PORT...",
		Short: "Delete ports (by UUID)",
		Args:  cobra.MinimumNArgs(1),
		RunE:  eachArg(o, func(ctx context.Context, c *client.Client, p string) error { return c.DeletePort(ctx, p) }, "Deleted port %s"),
	}
	cmd.AddCommand(list, create, del)
	return cmd
}

func newDriverCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{Use: "driver", Short: "Show the hardware types the controller offers"}
	addClientFlags(cmd, o)
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List enabled hardware types",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ds, err := c.ListDrivers(cmd.Context())
			if err != nil {
				return err
			}
			rows := make([]row, 0, len(ds))
			for _, d := range ds {
				rows = append(rows, row{"name": d.Name, "hosts": d.Hosts})
			}
			return o.printer(cmd).list([]column{{"name", "NAME"}, {"hosts", "HOSTS"}}, rows)
		},
	})
	return cmd
}
