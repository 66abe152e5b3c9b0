package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/proto"
)

// The hardware configuration commands: BIOS settings and firmware, read
// from the node's records and changed by manual cleaning (the node must be
// manageable), as Ironic does it.

func nodeBIOSCmd(o *cliOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "bios", Short: "List and change a node's BIOS settings"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list NODE",
		Short: "List the BIOS settings the node's BMC last reported",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			settings, err := c.ListBIOS(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			rows := make([]row, 0, len(settings))
			for _, s := range settings {
				rows = append(rows, row{"name": s.Name, "value": s.Value, "type": s.AttributeType,
					"allowed": strings.Join(s.AllowableValues, ","), "read_only": s.ReadOnly, "reset_required": s.ResetRequired})
			}
			return o.printer(cmd).list([]column{{"name", "NAME"}, {"value", "VALUE"}, {"type", "TYPE"}, {"allowed", "ALLOWED VALUES"},
				{"read_only", "READ ONLY"}, {"reset_required", "RESET REQUIRED"}}, rows)
		},
	})
	var w waitFlags
	set := &cobra.Command{
		Use:   "set NODE NAME=VALUE...",
		Short: "Apply BIOS settings by manual cleaning (bios.apply_configuration)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var settings []any
			for _, kv := range args[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("%q is not NAME=VALUE", kv)
				}
				settings = append(settings, map[string]any{"name": k, "value": parseValue(v)})
			}
			return cleanWith(cmd, o, w, args[0], proto.Dict{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": settings}})
		},
	}
	w.add(set)
	cmd.AddCommand(set)
	return cmd
}

func nodeFirmwareCmd(o *cliOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "firmware", Short: "List and update a node's firmware components"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list NODE",
		Short: "List the firmware components and their versions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			comps, err := c.ListFirmware(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			rows := make([]row, 0, len(comps))
			for _, f := range comps {
				rows = append(rows, row{"component": f.Component, "initial": f.InitialVersion, "current": f.CurrentVersion, "flashed": f.LastVersionFlashed})
			}
			return o.printer(cmd).list([]column{{"component", "COMPONENT"}, {"initial", "INITIAL VERSION"}, {"current", "CURRENT VERSION"},
				{"flashed", "LAST VERSION FLASHED"}}, rows)
		},
	})
	var w waitFlags
	update := &cobra.Command{
		Use:   "update NODE COMPONENT=URL...",
		Short: "Flash firmware images by manual cleaning (firmware.update)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var settings []any
			for _, kv := range args[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" || v == "" {
					return fmt.Errorf("%q is not COMPONENT=URL", kv)
				}
				settings = append(settings, map[string]any{"component": k, "url": v})
			}
			return cleanWith(cmd, o, w, args[0], proto.Dict{"interface": "firmware", "step": "update", "args": map[string]any{"settings": settings}})
		},
	}
	w.add(update)
	cmd.AddCommand(update)
	return cmd
}

// cleanWith starts a manual clean of node running step, and with --wait
// follows it to manageable (or its failure).
func cleanWith(cmd *cobra.Command, o *cliOptions, w waitFlags, node string, step proto.Dict) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	req := proto.ProvisionRequest{Target: proto.VerbClean, CleanSteps: []proto.Dict{step}}
	if err := c.SetProvisionState(cmd.Context(), node, req); err != nil {
		return err
	}
	if !w.wait {
		fmt.Fprintf(cmd.OutOrStdout(), "Requested %s.%s on node %s (manual cleaning)\n", step["interface"], step["step"], node)
		return nil
	}
	return waitNodes(cmd, c, []string{node}, provisionGoal(provisionVerb{name: "clean", target: proto.VerbClean, expect: proto.StateManageable}), w.timeout)
}
