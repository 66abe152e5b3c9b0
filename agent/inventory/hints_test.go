package inventory

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/hints"
	"github.com/kilnhq/kiln/proto"
)

// TestInventoryHintsSelectTheSameDisk: an operator copies a disk's serial,
// WWN, by-path name or HCTL from the stored inventory into root_device; at
// deploy time that hint must select the very same disk among the devices
// the agent writes to. Both come from one enumeration, so they agree.
func TestInventoryHintsSelectTheSameDisk(t *testing.T) {
	root := buildFixture(t, "machine1")
	inv, err := Collect(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	devs, err := disk.Enumerate(filepath.Join(root, "sys"), disk.EnumerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]int{}
	for _, d := range inv.Disks {
		for key, val := range map[string]proto.NullString{
			"serial": d.Serial, "wwn": d.WWN, "by_path": d.ByPath, "hctl": d.HCTL,
			"wwn_with_extension": d.WWNWithExtension,
		} {
			if val == "" {
				continue
			}
			hs, err := hints.ParseHints(map[string]any{key: string(val)})
			if err != nil {
				t.Fatalf("%s hint %q of %s: %v", key, val, d.Name, err)
			}
			got, err := hints.SelectRoot(devs, hs, nil)
			if err != nil || got.Name != d.Name {
				t.Errorf("%s hint %q copied from %s selects %q (%v)", key, val, d.Name, got.Name, err)
			}
			checked[key]++
		}
	}
	// The fixture has SATA, SAS, NVMe and virtio disks: every kind of
	// identity is exercised, so the test cannot pass by checking nothing.
	for _, key := range []string{"serial", "wwn", "by_path", "hctl"} {
		if checked[key] == 0 {
			t.Errorf("no disk in the fixture has a %s: the check is empty", key)
		}
	}
	if checked["by_path"] < 3 {
		t.Errorf("by_path checked on %d disks, want at least 3", checked["by_path"])
	}
}
