package raid

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// LogicalDisk is one entry of target_raid_config's logical_disks, the keys
// software RAID reads.
type LogicalDisk struct {
	// SizeGB is the size in GiB; 0 with Max set means the rest of the disks.
	SizeGB int64
	Max    bool
	// RAIDLevel as Ironic spells it: "0", "1", "1+0", "5", "6".
	RAIDLevel  string
	VolumeName string
	// IsRootVolume is nil when not given.
	IsRootVolume *bool
	Controller   string
	// PhysicalDisks are root-device-hint objects, one per member, or nil
	// for every disk.
	PhysicalDisks []map[string]any
	// Raw is the logical disk as given, reported back in raid_config.
	Raw map[string]any
}

// SupportedLevels are the RAID levels software RAID builds (IPA's).
var SupportedLevels = []string{"0", "1", "1+0", "5", "6"}

// Limits on what a target configuration may ask for.
const (
	maxLogicalDisks = 2 // IPA: one or two
	maxHints        = 64
	maxSizeGB       = 1 << 30
)

// Target reads node.target_raid_config. It returns nil, nil when the node
// has none or none of its logical disks asks for controller "software":
// the step then does nothing, as IPA's does.
func Target(node map[string]any) ([]LogicalDisk, error) {
	raw, ok := node["target_raid_config"]
	if !ok || raw == nil {
		return nil, nil
	}
	cfg, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("target_raid_config is %T, want an object", raw)
	}
	list, ok := cfg["logical_disks"]
	if !ok || list == nil {
		return nil, nil
	}
	items, ok := list.([]any)
	if !ok {
		return nil, fmt.Errorf("target_raid_config.logical_disks is %T, want a list", list)
	}
	var out []LogicalDisk
	software := false
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("logical disk %d is %T, want an object", i, it)
		}
		ld, err := parseLogicalDisk(m)
		if err != nil {
			return nil, fmt.Errorf("logical disk %d: %w", i, err)
		}
		software = software || ld.Controller == "software"
		out = append(out, ld)
	}
	if !software {
		return nil, nil
	}
	return out, nil
}

func parseLogicalDisk(m map[string]any) (LogicalDisk, error) {
	ld := LogicalDisk{Raw: m}
	switch v := m["size_gb"].(type) {
	case string:
		if v != "MAX" {
			return ld, fmt.Errorf("size_gb %q: want a number of GiB or \"MAX\"", v)
		}
		ld.Max = true
	case float64:
		if v <= 0 || v != math.Trunc(v) || v > maxSizeGB {
			return ld, fmt.Errorf("size_gb %v: want a positive whole number of GiB", v)
		}
		ld.SizeGB = int64(v)
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n <= 0 || n > maxSizeGB {
			return ld, fmt.Errorf("size_gb %v: want a positive whole number of GiB", v)
		}
		ld.SizeGB = n
	case nil:
		return ld, fmt.Errorf("size_gb is missing")
	default:
		return ld, fmt.Errorf("size_gb is %T: want a number of GiB or \"MAX\"", v)
	}
	switch v := m["raid_level"].(type) {
	case string:
		ld.RAIDLevel = v
	case nil:
		return ld, fmt.Errorf("raid_level is missing")
	default:
		return ld, fmt.Errorf("raid_level is %T, want a string", v)
	}
	var ok bool
	if v, has := m["volume_name"]; has && v != nil {
		if ld.VolumeName, ok = v.(string); !ok || ld.VolumeName == "" || len(ld.VolumeName) > 32 ||
			strings.ContainsFunc(ld.VolumeName, func(r rune) bool { return r <= ' ' || r == '/' || r == ':' || r > '~' }) {
			return ld, fmt.Errorf("volume_name %v: want 1 to 32 printable characters without '/', ':' or spaces", v)
		}
	}
	if v, has := m["is_root_volume"]; has && v != nil {
		b, ok := v.(bool)
		if !ok {
			return ld, fmt.Errorf("is_root_volume is %T, want a boolean", v)
		}
		ld.IsRootVolume = &b
	}
	if v, has := m["controller"]; has && v != nil {
		if ld.Controller, ok = v.(string); !ok {
			return ld, fmt.Errorf("controller is %T, want a string", v)
		}
	}
	if v, has := m["physical_disks"]; has && v != nil {
		list, ok := v.([]any)
		if !ok {
			return ld, fmt.Errorf("physical_disks is %T: the physical_disks parameter for software RAID must be a list with at least 2 items, each specifying a disk in the device hints format", v)
		}
		if len(list) > maxHints {
			return ld, fmt.Errorf("physical_disks has %d entries, at most %d", len(list), maxHints)
		}
		for _, e := range list {
			h, ok := e.(map[string]any)
			if !ok {
				return ld, fmt.Errorf("physical_disks entry %v: the physical_disks parameter for software RAID must be a list of device hints (dictionaries)", e)
			}
			ld.PhysicalDisks = append(ld.PhysicalDisks, h)
		}
		if len(ld.PhysicalDisks) < 2 {
			return ld, fmt.Errorf("the physical_disks parameter for software RAID must be a list with at least 2 items, each specifying a disk in the device hints format")
		}
	}
	return ld, nil
}

// Validate applies IPA's software RAID rules (validate_configuration): one
// or two logical disks, all with controller "software", the first RAID-1,
// the second of a supported level, at most one of size MAX, unique volume
// names, at most one root volume, and enough disks for RAID-5 (3) and
// RAID-6 (4). disks is how many block devices the machine has. Every
// broken rule is named in the error.
func Validate(lds []LogicalDisk, disks int) error {
	if len(lds) == 0 {
		return fmt.Errorf("RAID config contains no logical disks")
	}
	var errs []string
	if len(lds) > maxLogicalDisks {
		errs = append(errs, "Software RAID configuration requires one or two logical disks")
	}
	names := map[string]bool{}
	roots, maxes := 0, 0
	for _, ld := range lds {
		if ld.Controller != "software" {
			errs = append(errs, "Software RAID configuration requires all logical disks to have 'controller'='software'")
		}
		if ld.VolumeName != "" {
			if names[ld.VolumeName] {
				errs = append(errs, fmt.Sprintf("Duplicate software RAID device name %s detected", ld.VolumeName))
			}
			names[ld.VolumeName] = true
		}
		if ld.IsRootVolume != nil && *ld.IsRootVolume {
			roots++
		}
		if ld.Max {
			maxes++
		}
	}
	if roots > 1 {
		errs = append(errs, "Software RAID configuration allows only one logical disk to be marked as is_root_volume")
	}
	if lds[0].RAIDLevel != "1" {
		errs = append(errs, "Software RAID Configuration requires RAID-1 for the first logical disk")
	}
	if len(lds) == 2 {
		if maxes > 1 {
			errs = append(errs, "Software RAID can have only one RAID device with size 'MAX'")
		}
		lvl := lds[1].RAIDLevel
		if !slices.Contains(SupportedLevels, lvl) {
			errs = append(errs, fmt.Sprintf("Software RAID configuration does not support RAID level %s", lvl))
		}
		if lvl == "5" && disks < 3 {
			errs = append(errs, fmt.Sprintf("Software RAID configuration is not possible for RAID level 5 with only %d block devices found.", disks))
		}
		if lvl == "6" && disks < 4 {
			errs = append(errs, fmt.Sprintf("Software RAID configuration is not possible for RAID level 6 with only %d block devices found.", disks))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("could not validate software RAID config: %s", strings.Join(errs, "; "))
	}
	return nil
}
