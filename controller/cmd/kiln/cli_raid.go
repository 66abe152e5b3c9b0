package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/proto"
)

// maxRAIDConfig bounds a target RAID configuration read from a file.
const maxRAIDConfig = 1 << 20

func nodeRAIDCmd(o *cliOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "raid", Short: "Set a node's target RAID configuration and build it"}
	var w waitFlags
	var apply bool
	set := &cobra.Command{
		Use:   "set NODE CONFIG",
		Short: "Set target_raid_config (PUT …/states/raid); with --apply, build it by manual cleaning (raid.create_configuration)",
		Long: `CONFIG is the target RAID configuration as Ironic's RAID schema has it,
JSON or @FILE: {"logical_disks": [{"size_gb": "MAX", "raid_level": "1",
"is_root_volume": true}, ...]}. The API checks it against the schema; the volumes are
built the next time the node is cleaned, or at once with --apply, which
deletes the existing volumes first (the node must be manageable).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			raw, err := readRAIDConfig(args[1])
			if err != nil {
				return err
			}
			var cfg proto.Dict
			if err := json.Unmarshal(raw, &cfg); err != nil || cfg == nil {
				return fmt.Errorf("the RAID configuration is not a JSON object: %v", err)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.SetTargetRAID(cmd.Context(), node, cfg); err != nil {
				return err
			}
			if !apply {
				fmt.Fprintf(cmd.OutOrStdout(), "Set the target RAID configuration of node %s; it is built at the next cleaning\n", node)
				return nil
			}
			return cleanWith(cmd, o, w, node, proto.Dict{"interface": "raid", "step": "create_configuration", "args": map[string]any{"delete_existing": true}})
		},
	}
	set.Flags().BoolVar(&apply, "apply", false, "build the configuration now, by manual cleaning")
	w.add(set)
	cmd.AddCommand(set)
	return cmd
}

// readRAIDConfig reads CONFIG: JSON, or @FILE.
func readRAIDConfig(arg string) ([]byte, error) {
	path, isFile := strings.CutPrefix(arg, "@")
	if !isFile {
		return []byte(arg), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRAIDConfig+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRAIDConfig {
		return nil, fmt.Errorf("%s is larger than %d bytes, the most a RAID configuration may be", path, maxRAIDConfig)
	}
	return b, nil
}
