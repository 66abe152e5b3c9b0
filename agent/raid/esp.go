package raid

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/steps"
)

// ESPVolumeName names the md array of the members' ESPs, as IPA names it.
const ESPVolumeName = "esp"

// HolderESP is one member disk's EFI system partition.
type HolderESP struct {
	Disk      string // "/dev/sda"
	Partition disk.Partition
}

// HolderESPs finds the ESP create_configuration made on each disk of arr.
func HolderESPs(arr disk.MDArray) ([]HolderESP, error) {
	var out []HolderESP
	for _, d := range arr.Disks {
		t, err := disk.ReadTable(d)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(t.Partitions, func(p disk.Partition) bool { return p.Type == disk.GPTTypeESP })
		if i < 0 {
			return nil, fmt.Errorf("software RAID member %s has no EFI system partition (was the RAID built for UEFI?)", d)
		}
		out = append(out, HolderESP{Disk: d, Partition: t.Partitions[i]})
	}
	return out, nil
}

// MirrorESP puts the image's ESP (src, size bytes) on every member disk of
// arr, as IPA's prepare_boot_partitions_for_softraid: the members' ESPs
// become one md RAID-1 with metadata 1.0 (its superblock at the end, so
// firmware reads each member as a plain FAT file system) named "esp", and
// src is copied onto it. An esp array already running on them is reused.
func (m *Manager) MirrorESP(ctx context.Context, arr disk.MDArray, src io.Reader, size int64, s steps.Safety) ([]HolderESP, error) {
	esps, err := HolderESPs(arr)
	if err != nil {
		return nil, err
	}
	var parts []string
	for _, e := range esps {
		if err := s.Check(e.Disk); err != nil {
			return nil, err
		}
		parts = append(parts, disk.PartitionPath(e.Disk, e.Partition.Number))
	}
	md := ""
	arrays, err := disk.MDArrays(m.opts.SysRoot)
	if err != nil {
		return nil, err
	}
	for _, a := range arrays {
		if slices.ContainsFunc(a.Members, func(p string) bool { return slices.Contains(parts, p) }) {
			md = a.Name
		}
	}
	if md == "" {
		if md, err = m.freeMD(0); err != nil {
			return nil, err
		}
		argv := []string{"mdadm", "--create", md, "--force", "--run", "--metadata=1.0", "--level", "1",
			"--name", ESPVolumeName, "--raid-devices", fmt.Sprint(len(parts))}
		if _, err := m.opts.Run(ctx, append(argv, parts...)...); err != nil {
			return nil, fmt.Errorf("software RAID: mirror the ESPs %v: %w", parts, err)
		}
		m.opts.Log.Info("ESP mirror created", "device", md, "members", parts)
	}
	if err := copyInto(md, src, size); err != nil {
		return nil, fmt.Errorf("software RAID: copy the image's ESP onto %s: %w", md, err)
	}
	return esps, nil
}

func copyInto(dev string, src io.Reader, size int64) error {
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if size > end {
		return fmt.Errorf("the image's ESP (%d MiB) is larger than %s (%d MiB)", size>>20, dev, end>>20)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if n, err := io.Copy(f, io.LimitReader(src, size)); err != nil || n != size {
		return fmt.Errorf("copied %d of %d bytes: %v", n, size, err)
	}
	return f.Sync()
}
