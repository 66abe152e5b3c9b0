package inventory

import (
	"log/slog"
	"path/filepath"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/proto"
)

// readDisks lists the disks with the enumeration root device hints use
// (disk.Enumerate), so that a hint copied from the inventory selects the
// same disk. Software RAID arrays are left out, as lsblk's TYPE=disk filter
// in IPA leaves them: their members are listed instead.
func readDisks(root string, allowLoop []string, log *slog.Logger) ([]proto.Disk, error) {
	devs, err := disk.Enumerate(filepath.Join(root, "sys"), disk.EnumerateOptions{AllowLoop: allowLoop})
	if err != nil {
		return nil, err
	}
	disks := []proto.Disk{}
	for _, d := range devs {
		if d.Kind == disk.KindMD {
			continue
		}
		if d.Serial == "" && d.WWN == "" {
			log.Debug("disk has neither serial nor WWN in sysfs", "disk", d.Name)
		}
		disks = append(disks, proto.Disk{
			Name: d.Name, Model: proto.NullString(d.Model), Size: d.Size, Rotational: d.Rotational,
			WWN: proto.NullString(d.WWN), Serial: proto.NullString(d.Serial), Vendor: proto.NullString(d.Vendor),
			WWNWithExtension: proto.NullString(d.WWNWithExtension), WWNVendorExtension: proto.NullString(d.WWNVendorExtension),
			HCTL: proto.NullString(d.HCTL), ByPath: proto.NullString(d.ByPath), Tran: proto.NullString(d.Tran),
			LogicalSectors: d.LogicalSectors, PhysicalSectors: d.PhysicalSectors,
		})
	}
	return disks, nil
}
