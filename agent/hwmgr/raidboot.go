package hwmgr

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

// mdArray is the running software RAID array dev is, if it is one.
func (m *Manager) mdArray(dev string) (disk.MDArray, bool) {
	if !strings.HasPrefix(dev, "/dev/md") {
		return disk.MDArray{}, false
	}
	arrays, err := disk.MDArrays(m.opts.SysRoot)
	if err != nil {
		return disk.MDArray{}, false
	}
	for _, a := range arrays {
		if a.Name == dev && len(a.Members) > 0 {
			return a, true
		}
	}
	return disk.MDArray{}, false
}

// installOnRAID makes every member of the array the image went to bootable,
// as IPA does for software RAID (whole-disk and partition images alike):
//   - UEFI: the image's ESP is mirrored onto the ESPs create_configuration
//     made on the members (an md RAID-1 with metadata 1.0) and each member's
//     ESP gets its own boot entry, so either disk boots alone;
//   - BIOS: the image's GRUB is installed, from its root, on every member.
func (m *Manager) installOnRAID(ctx context.Context, dev string, arr disk.MDArray, mode string, p proto.InstallBootloaderParams, s steps.Safety) error {
	if mode == "bios" {
		if p.RootUUID == "" || p.RootUUID == "0x00000000" {
			return fmt.Errorf("install boot loader on software RAID %s: BIOS boot needs the image's GRUB on every member, and no root partition was given", dev)
		}
		for _, d := range arr.Disks {
			if err := s.Check(d); err != nil {
				return err
			}
		}
		return m.installGrub(ctx, grubTarget{Device: dev, RootUUID: p.RootUUID, Disks: arr.Disks})
	}
	t, err := disk.ReadTable(dev)
	if err != nil {
		return fmt.Errorf("install boot loader on software RAID %s: %w", dev, err)
	}
	var esp *disk.Partition
	for i, part := range t.Partitions {
		if part.Type == disk.GPTTypeESP || part.Type == disk.MBRTypeESP || (p.EFISystemPartUUID != "" && strings.EqualFold(part.UUID, p.EFISystemPartUUID)) {
			esp = &t.Partitions[i]
			break
		}
	}
	if esp == nil {
		return fmt.Errorf("install boot loader on software RAID %s: the image has no EFI system partition: is it UEFI-compatible?", dev)
	}
	f, err := os.Open(dev)
	if err != nil {
		return fmt.Errorf("install boot loader on software RAID %s: %w", dev, err)
	}
	defer f.Close()
	esps, err := m.opts.RAID.MirrorESP(ctx, arr, io.NewSectionReader(f, esp.Start, esp.Size), esp.Size, s)
	if err != nil {
		return fmt.Errorf("install boot loader on software RAID %s: %w", dev, err)
	}
	for i, e := range esps {
		if err := m.registerUEFILoaderNamed(e.Disk, e.Partition.UUID, fmt.Sprintf(" (RAID member %d)", i)); err != nil {
			return fmt.Errorf("install boot loader on software RAID member %s: %w", e.Disk, err)
		}
	}
	return nil
}
