package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/kilnhq/kiln/controller/client"
	"github.com/kilnhq/kiln/proto"
)

func newNodeCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{Use: "node", Short: "Enroll, inspect, deploy and manage bare-metal nodes"}
	addClientFlags(cmd, o)
	cmd.AddCommand(nodeListCmd(o), nodeShowCmd(o), nodeCreateCmd(o), nodeUpdateCmd(o), nodeDeleteCmd(o),
		nodePowerCmd(o), nodeBootDeviceCmd(o), nodeMaintenanceCmd(o), nodeHistoryCmd(o), nodeInventoryCmd(o),
		nodeBIOSCmd(o), nodeFirmwareCmd(o), nodeRAIDCmd(o))
	for _, v := range provisionVerbs {
		cmd.AddCommand(nodeProvisionCmd(o, v))
	}
	return cmd
}

var nodeListColumns = []column{
	{"uuid", "UUID"}, {"name", "NAME"}, {"instance_uuid", "INSTANCE UUID"}, {"power_state", "POWER STATE"},
	{"provision_state", "PROVISION STATE"}, {"maintenance", "MAINTENANCE"},
}

func nodeRow(n proto.Node) row {
	return row{"uuid": n.UUID, "name": n.Name, "instance_uuid": n.InstanceUUID, "power_state": n.PowerState,
		"provision_state": n.ProvisionState, "maintenance": n.Maintenance}
}

func nodeListCmd(o *cliOptions) *cobra.Command {
	var q client.NodeQuery
	var maint string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List nodes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if maint != "" {
				b := maint == "true"
				q.Maintenance = &b
			}
			nodes, err := c.ListNodes(cmd.Context(), q)
			if err != nil {
				return err
			}
			rows := make([]row, 0, len(nodes))
			for _, n := range nodes {
				rows = append(rows, nodeRow(n))
			}
			return o.printer(cmd).list(nodeListColumns, rows)
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.ProvisionState, "provision-state", "", "only nodes in this provision state")
	f.StringVar(&q.Driver, "driver", "", "only nodes of this hardware type")
	f.StringVar(&q.ResourceClass, "resource-class", "", "only nodes of this resource class")
	f.StringVar(&maint, "maintenance", "", "only nodes in (true) or out of (false) maintenance")
	return cmd
}

func nodeShowCmd(o *cliOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show NODE",
		Short: "Show a node's fields (by UUID or name)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			n, err := c.GetNode(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.printer(cmd).object(n)
		},
	}
}

// parseValue reads a command-line value as JSON when it is valid JSON (a
// number, true, an object…), else as a string — as the baremetal client does.
func parseValue(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err == nil {
		return v
	}
	return s
}

// keyValues turns ["a=1", "b=x"] into a dict.
func keyValues(flag string, kvs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid --%s %q: want KEY=VALUE", flag, kv)
		}
		out[k] = parseValue(v)
	}
	return out, nil
}

// nodeFile is a bulk-enrollment file: a list of nodes, or {"nodes": [...]}
// as `baremetal create` reads; each node may carry "ports".
func readNodeFile(r io.Reader) ([]map[string]any, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var doc any
	// YAML is a superset of JSON: one decoder reads both.
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("parse nodes file: %w", err)
	}
	if m, ok := doc.(map[string]any); ok {
		doc = m["nodes"]
		if doc == nil {
			return nil, fmt.Errorf("nodes file: a list of nodes, or an object with \"nodes\", expected")
		}
	}
	list, ok := doc.([]any)
	if !ok {
		return nil, fmt.Errorf("nodes file: \"nodes\" must be a list")
	}
	out := make([]map[string]any, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			out = append(out, nil) // reported as a failure of entry i
			_ = i
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

func nodeCreateCmd(o *cliOptions) *cobra.Command {
	var (
		file                                         string
		driver, name, uuid, resourceClass            string
		driverInfo, properties, extra, instanceInfo  []string
		bootIface, deployIface, inspectIface, mgmtIf string
		powerIface                                   string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Enroll a node, or many from a YAML/JSON file (-f)",
		Long: `Enroll one node from flags, or every node of a YAML or JSON file with -f
(a list of nodes, or {"nodes": [...]}, each with optional "ports": [{"address": ...}]).
With -f, each failure is reported and the others are still created; the exit
status is non-zero if any failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if file != "" {
				return bulkCreate(cmd, o, c, file)
			}
			if driver == "" {
				return fmt.Errorf("--driver is required (or -f FILE)")
			}
			fields := map[string]any{"driver": driver}
			for k, v := range map[string]string{"name": name, "uuid": uuid, "resource_class": resourceClass,
				"boot_interface": bootIface, "deploy_interface": deployIface, "inspect_interface": inspectIface,
				"management_interface": mgmtIf, "power_interface": powerIface} {
				if v != "" {
					fields[k] = v
				}
			}
			for k, kvs := range map[string][]string{"driver_info": driverInfo, "properties": properties, "extra": extra, "instance_info": instanceInfo} {
				if len(kvs) == 0 {
					continue
				}
				d, err := keyValues(strings.ReplaceAll(k, "_", "-"), kvs)
				if err != nil {
					return err
				}
				fields[k] = d
			}
			n, err := c.CreateNode(cmd.Context(), fields)
			if err != nil {
				return err
			}
			return o.printer(cmd).object(n)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "YAML or JSON file of nodes to enroll ('-' for stdin)")
	f.StringVar(&driver, "driver", "", "hardware type: redfish, ipmi, fake-hardware")
	f.StringVar(&name, "name", "", "node name")
	f.StringVar(&uuid, "uuid", "", "node UUID (default: generated)")
	f.StringVar(&resourceClass, "resource-class", "", "resource class")
	f.StringArrayVar(&driverInfo, "driver-info", nil, "driver_info KEY=VALUE (repeatable), e.g. redfish_address=https://10.0.0.5")
	f.StringArrayVar(&properties, "property", nil, "properties KEY=VALUE (repeatable)")
	f.StringArrayVar(&extra, "extra", nil, "extra KEY=VALUE (repeatable)")
	f.StringArrayVar(&instanceInfo, "instance-info", nil, "instance_info KEY=VALUE (repeatable)")
	f.StringVar(&bootIface, "boot-interface", "", "boot interface (ipxe, redfish-virtual-media, …)")
	f.StringVar(&deployIface, "deploy-interface", "", "deploy interface (direct, ramdisk, custom-agent, fake)")
	f.StringVar(&inspectIface, "inspect-interface", "", "inspect interface")
	f.StringVar(&mgmtIf, "management-interface", "", "management interface")
	f.StringVar(&powerIface, "power-interface", "", "power interface")
	return cmd
}

// bulkCreate enrolls every node of a file, with its ports, reporting each
// failure on stderr and carrying on.
func bulkCreate(cmd *cobra.Command, o *cliOptions, c *client.Client, file string) error {
	var r io.Reader = cmd.InOrStdin()
	if file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return err
		}
		defer fh.Close()
		r = fh
	}
	nodes, err := readNodeFile(r)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	var rows []row
	failed, entries := 0, 0
	for i, fields := range nodes {
		entries++
		label := fmt.Sprintf("node %d", i+1)
		if fields == nil {
			fmt.Fprintf(stderr, "%s: not an object\n", label)
			failed++
			continue
		}
		if nm, ok := fields["name"].(string); ok {
			label += " (" + nm + ")"
		}
		ports, _ := fields["ports"].([]any)
		delete(fields, "ports")
		delete(fields, "portgroups")
		n, err := c.CreateNode(ctx, fields)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", label, err)
			failed++
			continue
		}
		rows = append(rows, nodeRow(*n))
		for j, p := range ports {
			entries++
			pf, ok := p.(map[string]any)
			if !ok {
				fmt.Fprintf(stderr, "%s port %d: not an object\n", label, j+1)
				failed++
				continue
			}
			pf["node_uuid"] = n.UUID
			if _, err := c.CreatePort(ctx, pf); err != nil {
				fmt.Fprintf(stderr, "%s port %d (%v): %v\n", label, j+1, pf["address"], err)
				failed++
			}
		}
	}
	if err := o.printer(cmd).list(nodeListColumns, rows); err != nil {
		return err
	}
	if failed > 0 {
		return errFailed{fmt.Sprintf("%d of %d entries (nodes and ports) failed", failed, entries)}
	}
	return nil
}

// patchOps builds a JSON patch from --set path=value and --unset path.
func patchOps(sets, unsets []string) ([]client.PatchOp, error) {
	var ops []client.PatchOp
	norm := func(p string) string { return "/" + strings.TrimPrefix(strings.TrimSpace(p), "/") }
	for _, s := range sets {
		p, v, ok := strings.Cut(s, "=")
		if !ok || strings.Trim(p, "/ ") == "" {
			return nil, fmt.Errorf("invalid --set %q: want PATH=VALUE, e.g. driver_info/redfish_address=https://10.0.0.5", s)
		}
		ops = append(ops, client.PatchOp{Op: "add", Path: norm(p), Value: parseValue(v)})
	}
	for _, u := range unsets {
		if strings.Trim(u, "/ ") == "" {
			return nil, fmt.Errorf("invalid --unset %q: want PATH", u)
		}
		ops = append(ops, client.PatchOp{Op: "remove", Path: norm(u)})
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("nothing to change: give --set PATH=VALUE or --unset PATH")
	}
	return ops, nil
}

func nodeUpdateCmd(o *cliOptions) *cobra.Command {
	var sets, unsets []string
	cmd := &cobra.Command{
		Use:   "update NODE",
		Short: "Change a node's fields (JSON patch from --set / --unset)",
		Example: `  kiln node update n1 --set driver_info/redfish_address=https://10.0.0.5 --set name=rack1-n1
  kiln node update n1 --set instance_info/image_source=http://images/img.raw --unset extra/note`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ops, err := patchOps(sets, unsets)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			n, err := c.UpdateNode(cmd.Context(), args[0], ops)
			if err != nil {
				return err
			}
			return o.printer(cmd).object(n)
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "PATH=VALUE to add or replace (VALUE read as JSON when it is JSON); repeatable")
	cmd.Flags().StringArrayVar(&unsets, "unset", nil, "PATH to remove; repeatable")
	return cmd
}

func nodeDeleteCmd(o *cliOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NODE...",
		Short: "Delete nodes",
		Args:  cobra.MinimumNArgs(1),
		RunE:  eachArg(o, func(ctx context.Context, c *client.Client, n string) error { return c.DeleteNode(ctx, n) }, "Deleted node %s"),
	}
}

// eachArg is the RunE of a command that acts on each node or port named:
// act, then done (a format of the name) on standard output.
func eachArg(o *cliOptions, act func(ctx context.Context, c *client.Client, name string) error, done string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := o.client()
		if err != nil {
			return err
		}
		return eachNode(cmd, args, func(ctx context.Context, name string) error {
			if err := act(ctx, c, name); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), done+"\n", name)
			return nil
		})
	}
}

// eachNode runs fn for every node named, reporting each failure and going on.
func eachNode(cmd *cobra.Command, nodes []string, fn func(ctx context.Context, node string) error) error {
	failed := 0
	for _, n := range nodes {
		if err := fn(cmd.Context(), n); err != nil {
			if len(nodes) == 1 {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "kiln: %s: %v\n", n, err)
			failed++
		}
	}
	if failed > 0 {
		return errFailed{fmt.Sprintf("%d of %d nodes failed", failed, len(nodes))}
	}
	return nil
}

// provisionVerb is one `kiln node <verb>` command.
type provisionVerb struct {
	name   string
	target proto.Verb
	short  string
	// expect is the stable state a successful run ends in ("" for any).
	expect proto.ProvisionState
}

var provisionVerbs = []provisionVerb{
	{"manage", proto.VerbManage, "Verify a node's BMC credentials and make it manageable", proto.StateManageable},
	{"provide", proto.VerbProvide, "Clean a manageable node and make it available", proto.StateAvailable},
	{"inspect", proto.VerbInspect, "Inspect a manageable node's hardware", proto.StateManageable},
	{"clean", proto.VerbClean, "Run clean steps on a manageable node (--clean-steps)", proto.StateManageable},
	{"deploy", proto.VerbActive, "Deploy instance_info's image on an available node", proto.StateActive},
	{"undeploy", proto.VerbDeleted, "Tear a deployed node down (then it is cleaned and available)", proto.StateAvailable},
	{"rebuild", proto.VerbRebuild, "Redeploy an active node", proto.StateActive},
	{"abort", proto.VerbAbort, "Abort a node's running operation", ""},
}

// waitFlags are the flags of every state-changing command.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&w.wait, "wait", false, "follow the nodes until they reach a stable or failed state; non-zero exit status on failure")
	cmd.Flags().DurationVar(&w.timeout, "timeout", time.Hour, "how long --wait waits")
}

func nodeProvisionCmd(o *cliOptions, v provisionVerb) *cobra.Command {
	var w waitFlags
	var cleanSteps, deploySteps, configDrive string
	cmd := &cobra.Command{
		Use:   v.name + " NODE...",
		Short: v.short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			req := proto.ProvisionRequest{Target: v.target}
			if cleanSteps != "" {
				if req.CleanSteps, err = readSteps(cleanSteps); err != nil {
					return fmt.Errorf("--clean-steps: %w", err)
				}
			} else if v.target == proto.VerbClean {
				return fmt.Errorf("--clean-steps is required, e.g. '[{\"interface\":\"deploy\",\"step\":\"erase_devices_metadata\"}]'")
			}
			if deploySteps != "" {
				if req.DeploySteps, err = readSteps(deploySteps); err != nil {
					return fmt.Errorf("--deploy-steps: %w", err)
				}
			}
			if configDrive != "" {
				req.ConfigDrive = readConfigDrive(configDrive)
			}
			var started []string
			err = eachNode(cmd, args, func(ctx context.Context, n string) error {
				if err := c.SetProvisionState(ctx, n, req); err != nil {
					return err
				}
				started = append(started, n)
				if !w.wait {
					fmt.Fprintf(cmd.OutOrStdout(), "Requested %s of node %s\n", v.name, n)
				}
				return nil
			})
			if !w.wait || len(started) == 0 {
				return err
			}
			werr := waitNodes(cmd, c, started, provisionGoal(v), w.timeout)
			if err != nil {
				return err
			}
			return werr
		},
	}
	w.add(cmd)
	switch v.target {
	case proto.VerbClean:
		cmd.Flags().StringVar(&cleanSteps, "clean-steps", "", "clean steps as JSON, or @FILE")
	case proto.VerbActive, proto.VerbRebuild:
		cmd.Flags().StringVar(&deploySteps, "deploy-steps", "", "extra deploy steps as JSON, or @FILE")
		cmd.Flags().StringVar(&configDrive, "config-drive", "", "config drive: a URL, a gzip+base64 ISO, or JSON {meta_data,user_data,network_data}, or @FILE")
	}
	return cmd
}

func readArg(s string) ([]byte, error) {
	if strings.HasPrefix(s, "@") {
		return os.ReadFile(s[1:])
	}
	return []byte(s), nil
}

func readSteps(s string) ([]proto.Dict, error) {
	b, err := readArg(s)
	if err != nil {
		return nil, err
	}
	var steps []proto.Dict
	if err := yaml.Unmarshal(b, &steps); err != nil {
		return nil, fmt.Errorf("want a JSON list of steps: %w", err)
	}
	return steps, nil
}

func readConfigDrive(s string) any {
	b, err := readArg(s)
	if err != nil {
		return s
	}
	var d map[string]any
	if json.Unmarshal(b, &d) == nil {
		return d
	}
	return strings.TrimSpace(string(b))
}
