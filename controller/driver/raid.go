package driver

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// RAIDResult is what a RAID configuration step leaves for the conductor
// to record on the node.
type RAIDResult struct {
	// RAIDConfig becomes the node's raid_config: {"logical_disks": [...]}
	// as built, or {} after a delete.
	RAIDConfig proto.Dict
	// RootDevice, when a root volume was built, becomes
	// properties.root_device: the hints that find it.
	RootDevice proto.Dict
}

// RAID builds and removes logical disks (the node's raid_interface).
type RAID interface {
	// CreateConfiguration builds target's logical disks (the root volume,
	// the others, or both) and waits for the BMC to finish.
	CreateConfiguration(ctx context.Context, n *proto.Node, target []LogicalDisk, env StepEnv) (RAIDResult, error)
	// DeleteConfiguration removes every logical disk.
	DeleteConfiguration(ctx context.Context, n *proto.Node, env StepEnv) (RAIDResult, error)
}

var raids = map[string]RAID{}

// RegisterRAID registers a raid interface implementation under name.
func RegisterRAID(name string, r RAID) { register(raids, "raid", name, r) }

// ResolveRAID returns the node's raid interface; ErrNoInterface for
// no-raid.
func ResolveRAID(n *proto.Node) (RAID, error) {
	ensureLoaded()
	implMu.RLock()
	defer implMu.RUnlock()
	if r, ok := raids[n.RAIDInterface]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("raid interface %q: %w", n.RAIDInterface, ErrNoInterface)
}

// LogicalDisk is one entry of target_raid_config's logical_disks, as
// Ironic's RAID schema has it.
type LogicalDisk struct {
	// SizeGB is the size in GiB; 0 means "MAX" (all the drives give).
	SizeGB     int64
	RAIDLevel  string // "0", "1", "5", "10", …
	Root       bool   // is_root_volume
	Name       string // volume_name
	Controller string
	// PhysicalDisks names the drives to use (BMC drive IDs or paths);
	// empty: any free drives, NumberOfPhysicalDisks of them (or the
	// level's minimum).
	PhysicalDisks         []string
	NumberOfPhysicalDisks int
}

// raidMinDisks is the fewest drives each RAID level takes.
var raidMinDisks = map[string]int{"0": 1, "1": 2, "5": 3, "6": 4, "10": 4, "1+0": 4}

// MinDisks is how many drives a level needs at least (or as asked).
func (d LogicalDisk) MinDisks() int {
	if d.NumberOfPhysicalDisks > 0 {
		return d.NumberOfPhysicalDisks
	}
	if len(d.PhysicalDisks) > 0 {
		return len(d.PhysicalDisks)
	}
	return raidMinDisks[d.RAIDLevel]
}

// ParseTargetRAID reads target_raid_config, checking what Ironic's schema
// checks: each logical disk has a size_gb (a positive number or "MAX")
// and a known raid_level, at most one is the root volume, at most 64.
// createRoot and createNonRoot filter as create_configuration's
// arguments do.
func ParseTargetRAID(target proto.Dict, createRoot, createNonRoot bool) ([]LogicalDisk, error) {
	raw, ok := target["logical_disks"].([]any)
	if !ok || len(raw) == 0 {
		return nil, fmt.Errorf("the node's target_raid_config has no logical_disks")
	}
	if len(raw) > 64 {
		return nil, fmt.Errorf("target_raid_config lists %d logical disks; at most 64 are allowed", len(raw))
	}
	var out []LogicalDisk
	roots := 0
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("target_raid_config logical_disks[%d] is not an object", i)
		}
		var d LogicalDisk
		switch v := m["size_gb"].(type) {
		case string:
			if v != "MAX" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n <= 0 {
					return nil, fmt.Errorf(`logical_disks[%d]: size_gb %q is neither a positive number nor "MAX"`, i, v)
				}
				d.SizeGB = n
			}
		case float64:
			if v <= 0 || v != float64(int64(v)) {
				return nil, fmt.Errorf("logical_disks[%d]: size_gb %v is not a positive whole number", i, v)
			}
			d.SizeGB = int64(v)
		default:
			return nil, fmt.Errorf(`logical_disks[%d]: size_gb is required (a number of GiB or "MAX")`, i)
		}
		d.RAIDLevel = fmt.Sprint(m["raid_level"])
		if _, known := raidMinDisks[d.RAIDLevel]; !known {
			return nil, fmt.Errorf("logical_disks[%d]: raid_level %v is not one of 0, 1, 5, 6, 10, 1+0", i, m["raid_level"])
		}
		d.Root, _ = m["is_root_volume"].(bool)
		if d.Root {
			roots++
		}
		d.Name, _ = m["volume_name"].(string)
		d.Controller, _ = m["controller"].(string)
		if pd, ok := m["physical_disks"].([]any); ok {
			for _, p := range pd {
				s, ok := p.(string)
				if !ok || s == "" {
					return nil, fmt.Errorf("logical_disks[%d]: physical_disks must be a list of drive names", i)
				}
				d.PhysicalDisks = append(d.PhysicalDisks, s)
			}
		}
		if n, ok := m["number_of_physical_disks"].(float64); ok {
			d.NumberOfPhysicalDisks = int(n)
		}
		if (d.Root && createRoot) || (!d.Root && createNonRoot) {
			out = append(out, d)
		}
	}
	if roots > 1 {
		return nil, fmt.Errorf("target_raid_config has %d root volumes; at most one is allowed", roots)
	}
	return out, nil
}

// RAIDLevelName is the Redfish RAIDType of an Ironic raid_level.
func RAIDLevelName(level string) string {
	return "RAID" + strings.ReplaceAll(level, "+", "")
}
