package disk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// Partition types of software RAID members.
const (
	GPTTypeLinuxRAID = "A19D880F-05FC-4D3B-A006-743F0F84911E"
	MBRTypeLinuxRAID = 0xfd
)

// PartSpec is one partition WriteTable creates at a place the caller chose.
type PartSpec struct {
	// Start and Size in bytes, multiples of 1 MiB; Size 0 runs to the end
	// of the usable space.
	Start, Size int64
	GPTType     string // for a GPT table
	MBRType     byte   // for an MBR table
	Name        string // GPT partition name
}

// WriteTable replaces dev's partition table with a new label ("gpt" or
// "msdos") holding parts, numbered from 1 in order, and makes the kernel's
// partition devices match. Parts must not overlap and must fit.
func WriteTable(ctx context.Context, g Guard, dev, label string, parts []PartSpec) ([]Partition, error) {
	if err := g.Check(dev); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("write partition table on %s: %w", dev, err)
	}
	defer f.Close()
	size, err := deviceSize(f)
	if err != nil {
		return nil, err
	}
	ss := int64(sectorSize(f))
	end := size
	switch label {
	case "gpt":
		end = size - 33*ss
	case "msdos":
		end = min(end, (1<<32-1)*ss)
		if len(parts) > 4 {
			return nil, fmt.Errorf("write partition table on %s: %d partitions do not fit an MBR", dev, len(parts))
		}
	default:
		return nil, fmt.Errorf("disk label %q: want gpt or msdos", label)
	}
	end = end / alignBytes * alignBytes
	out := make([]Partition, len(parts))
	slots := make([]slot, len(parts))
	pos := int64(alignBytes)
	for i, p := range parts {
		if p.Start%alignBytes != 0 || p.Size%alignBytes != 0 || p.Start < pos || p.Size < 0 {
			return nil, fmt.Errorf("write partition table on %s: partition %d (start %d, size %d) is not MiB-aligned after the previous one", dev, i+1, p.Start, p.Size)
		}
		n := p.Size
		if n == 0 {
			n = end - p.Start
		}
		if n <= 0 || p.Start+n > end {
			return nil, fmt.Errorf("write partition table on %s: no room for partition %d (%d MiB at %d MiB; the disk has %d MiB)", dev, i+1, n>>20, p.Start>>20, size>>20)
		}
		out[i] = Partition{Number: i + 1, Start: p.Start, Size: n, Name: p.Name, Type: p.GPTType}
		if label == "msdos" {
			out[i].Type = fmt.Sprintf("0x%02x", p.MBRType)
		}
		slots[i] = slot{p: &out[i], gptType: p.GPTType, mbrType: p.MBRType, name: p.Name}
		pos = p.Start + n
	}
	if label == "gpt" {
		err = writeNewGPT(f, size, ss, slots)
	} else {
		err = writeNewMBR(f, ss, slots, false)
	}
	if err != nil {
		return nil, fmt.Errorf("write partition table on %s: %w", dev, err)
	}
	if isBlockDevice(f) {
		if err := rereadFile(ctx, f); err != nil {
			return nil, fmt.Errorf("write partition table on %s: %w", dev, err)
		}
	}
	return out, nil
}

// PartitionPath is the device of partition n of dev, as the kernel names
// it: a "p" between a name ending in a digit and the number
// (/dev/nvme0n1p1, /dev/loop3p1, /dev/md0p1), none otherwise (/dev/sda1).
func PartitionPath(dev string, n int) string {
	if dev != "" && unicode.IsDigit(rune(dev[len(dev)-1])) {
		return fmt.Sprintf("%sp%d", dev, n)
	}
	return fmt.Sprintf("%s%d", dev, n)
}

// MDArray is a software RAID device the kernel runs.
type MDArray struct {
	Name    string   // "/dev/md0"
	Members []string // component devices, "/dev/sda1"
	Disks   []string // the whole disks holding them, "/dev/sda"
}

// MDArrays lists the md devices under sysRoot ("" = /sys) with their
// members (sysfs slaves) and the whole disks holding those members. An md
// device without members (a partition of an array, an inactive node) is
// listed with none.
func MDArrays(sysRoot string) ([]MDArray, error) {
	if sysRoot == "" {
		sysRoot = DefaultSysRoot
	}
	entries, err := os.ReadDir(filepath.Join(sysRoot, "block"))
	if err != nil {
		return nil, fmt.Errorf("list md devices: %w", err)
	}
	var out []MDArray
	for _, e := range entries {
		if classify(e.Name()) != KindMD {
			continue
		}
		a := MDArray{Name: "/dev/" + e.Name()}
		slaves, _ := os.ReadDir(filepath.Join(sysRoot, "block", e.Name(), "slaves"))
		for _, s := range slaves {
			a.Members = append(a.Members, "/dev/"+s.Name())
			d := "/dev/" + holderDisk(sysRoot, s.Name())
			if !slices.Contains(a.Disks, d) {
				a.Disks = append(a.Disks, d)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// holderDisk is the whole disk a block device belongs to: its parent in
// sysfs for a partition, itself otherwise.
func holderDisk(sysRoot, name string) string {
	p := filepath.Join(sysRoot, "class/block", name)
	if _, err := os.Stat(filepath.Join(p, "partition")); err != nil {
		return name
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return name
	}
	return filepath.Base(filepath.Dir(real))
}

// mdDisks returns the whole disks an md device is built on, or nil when dev
// is not a running md device.
func mdDisks(dev string) []string {
	name := filepath.Base(canonical(dev))
	if !strings.HasPrefix(name, "md") {
		return nil
	}
	arrays, err := MDArrays("")
	if err != nil {
		return nil
	}
	for _, a := range arrays {
		if a.Name == "/dev/"+name {
			return a.Disks
		}
	}
	return nil
}
