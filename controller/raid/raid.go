// Package raid checks a node's target RAID configuration the way Ironic
// does (its RAID configuration schema and the one-root-volume rule) and
// describes the logical disk properties a configuration may use. It is
// pure: no I/O.
package raid

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Levels are the RAID levels a logical disk may ask for.
var Levels = []string{"JBOD", "0", "1", "2", "5", "6", "1+0", "5+0", "6+0"}

// LogicalDiskProperties describes each key of a logical disk, as GET
// /v1/drivers/{name}/raid/logical_disk_properties shows them.
var LogicalDiskProperties = map[string]string{
	"raid_level":               "RAID level of the logical disk: one of " + strings.Join(Levels, ", ") + ". Required.",
	"size_gb":                  "Size of the logical disk in GiB (an integer), or \"MAX\" for the rest of the space. Required.",
	"volume_name":              "Name of the volume to create; generated when not given. Optional.",
	"is_root_volume":           "Whether this logical disk is the root volume; false when not given. Optional.",
	"share_physical_disks":     "Whether other logical disks may share this one's physical disks; false when not given. Optional.",
	"disk_type":                "Preferred type of physical disk: hdd or ssd; any when not given. Optional.",
	"interface_type":           "Interface of the physical disks: sata, scsi or sas; any when not given. Optional.",
	"number_of_physical_disks": "How many physical disks to use; the minimum the RAID level needs when not given. Optional.",
	"controller":               "RAID controller to use; the driver picks one when not given. Optional.",
	"physical_disks":           "Physical disks to use (names, or at least two objects); the driver picks them when not given. Needs controller. Optional.",
}

// Validate checks a target RAID configuration: {} (no RAID wanted) or
// {"logical_disks": [...]} with at least one disk, each with a raid_level
// and size_gb and only the keys of LogicalDiskProperties, and at most one
// root volume. The error says what is wrong, for a 400.
func Validate(cfg map[string]any) error {
	if len(cfg) == 0 {
		return nil
	}
	for k := range cfg {
		if k != "logical_disks" {
			return fmt.Errorf("RAID config validation error: Additional properties are not allowed (%q was unexpected)", k)
		}
	}
	disks, ok := cfg["logical_disks"].([]any)
	if !ok {
		return fmt.Errorf("RAID config validation error: 'logical_disks' must be a list")
	}
	if len(disks) == 0 {
		return fmt.Errorf("RAID config validation error: 'logical_disks' must have at least one logical disk")
	}
	roots := 0
	for i, d := range disks {
		disk, ok := d.(map[string]any)
		if !ok {
			return fmt.Errorf("RAID config validation error: logical disk %d is not an object", i)
		}
		if err := checkDisk(disk); err != nil {
			return fmt.Errorf("RAID config validation error: logical disk %d: %w", i, err)
		}
		if r, _ := disk["is_root_volume"].(bool); r {
			roots++
		}
	}
	if roots > 1 {
		return fmt.Errorf("Raid config cannot have more than one root volume. %d root volumes were specified", roots)
	}
	return nil
}

func checkDisk(d map[string]any) error {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := LogicalDiskProperties[k]; !ok {
			return fmt.Errorf("Additional properties are not allowed (%q was unexpected)", k)
		}
	}
	for _, k := range []string{"raid_level", "size_gb"} {
		if _, ok := d[k]; !ok {
			return fmt.Errorf("%q is a required property", k)
		}
	}
	if lvl, ok := d["raid_level"].(string); !ok || !slices.Contains(Levels, lvl) {
		return fmt.Errorf("raid_level %v is not one of %v", d["raid_level"], Levels)
	}
	switch v := d["size_gb"].(type) {
	case string:
		if v != "MAX" {
			return fmt.Errorf("size_gb %q is neither a non-negative integer nor \"MAX\"", v)
		}
	default:
		if n, ok := integer(v); !ok || n < 0 {
			return fmt.Errorf("size_gb %v is neither a non-negative integer nor \"MAX\"", v)
		}
	}
	for _, k := range []string{"volume_name", "controller"} {
		if v, ok := d[k]; ok {
			if _, isStr := v.(string); !isStr {
				return fmt.Errorf("%s %v is not a string", k, v)
			}
		}
	}
	for _, k := range []string{"is_root_volume", "share_physical_disks"} {
		if v, ok := d[k]; ok {
			if _, isBool := v.(bool); !isBool {
				return fmt.Errorf("%s %v is not a boolean", k, v)
			}
		}
	}
	for k, allowed := range map[string][]string{"disk_type": {"hdd", "ssd"}, "interface_type": {"sata", "scsi", "sas"}} {
		if v, ok := d[k]; ok {
			if s, isStr := v.(string); !isStr || !slices.Contains(allowed, s) {
				return fmt.Errorf("%s %v is not one of %v", k, v, allowed)
			}
		}
	}
	if v, ok := d["number_of_physical_disks"]; ok {
		if n, isInt := integer(v); !isInt || n <= 0 {
			return fmt.Errorf("number_of_physical_disks %v is not a positive integer", v)
		}
	}
	if v, ok := d["physical_disks"]; ok {
		if err := checkPhysicalDisks(v); err != nil {
			return err
		}
		if _, ok := d["controller"]; !ok {
			return fmt.Errorf("'controller' is a dependency of 'physical_disks'")
		}
	}
	return nil
}

// checkPhysicalDisks: a list of names, or of at least two objects.
func checkPhysicalDisks(v any) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("physical_disks is not a list")
	}
	names, objects := 0, 0
	for _, e := range list {
		switch e.(type) {
		case string:
			names++
		case map[string]any:
			objects++
		default:
			return fmt.Errorf("physical_disks holds %v, neither a name nor an object", e)
		}
	}
	if names > 0 && objects > 0 {
		return fmt.Errorf("physical_disks mixes names and objects")
	}
	if objects > 0 && objects < 2 {
		return fmt.Errorf("physical_disks as objects needs at least 2")
	}
	return nil
}

// integer reads a JSON number (float64 or json.Number) that is a whole
// number.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	case int:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}
