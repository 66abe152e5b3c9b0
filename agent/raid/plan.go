package raid

import (
	"fmt"
	"slices"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/hints"
)

// Members picks the disks of each logical disk, as IPA's
// get_block_devices_for_raid: with physical_disks, each hint object takes
// the first device (in devs' order) it matches that this logical disk has
// not taken yet; without, the logical disk spans every device. It returns
// every disk involved (first use order) and each logical disk's disks.
func Members(devs []disk.Device, lds []LogicalDisk) (all []string, per [][]string, err error) {
	for i, ld := range lds {
		var picked []string
		if len(ld.PhysicalDisks) == 0 {
			for _, d := range devs {
				picked = append(picked, d.Name)
			}
		}
		for _, h := range ld.PhysicalDisks {
			hs, err := hints.ParseHints(h)
			if err != nil {
				return nil, nil, fmt.Errorf("logical disk %d: physical disk %v: %w", i, h, err)
			}
			var cands []string
			for _, d := range devs {
				if hs.Match(d) {
					cands = append(cands, d.Name)
				}
			}
			if len(cands) == 0 {
				return nil, nil, fmt.Errorf("logical disk %d: no candidates for physical disk %v among %s", i, h, names(devs))
			}
			j := slices.IndexFunc(cands, func(c string) bool { return !slices.Contains(picked, c) })
			if j < 0 {
				return nil, nil, fmt.Errorf("logical disk %d: no candidates left for physical disk %v from %v after picking %v", i, h, cands, picked)
			}
			picked = append(picked, cands[j])
		}
		if n := minMembers(ld.RAIDLevel); len(picked) < n {
			return nil, nil, fmt.Errorf("logical disk %d: RAID-%s needs at least %d disks, found %v", i, ld.RAIDLevel, n, picked)
		}
		per = append(per, picked)
		for _, p := range picked {
			if !slices.Contains(all, p) {
				all = append(all, p)
			}
		}
	}
	return all, per, nil
}

func names(devs []disk.Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.Name
	}
	return out
}

func minMembers(level string) int {
	switch level {
	case "5":
		return 3
	case "6":
		return 4
	}
	return 2
}

// Space IPA leaves before the first RAID partition (raid_utils'
// calculate_raid_start): room for a 550 MiB ESP in UEFI mode, for a BIOS
// boot partition on GPT disks in BIOS mode, the first MiB on MBR disks.
const (
	ESPSizeMiB     = 550
	uefiStartMiB   = ESPSizeMiB + 1
	gptBIOSStartMB = 8
	mbrStartMiB    = 1
	mib            = 1 << 20
	gib            = 1 << 30
)

// Array is one md device to build.
type Array struct {
	// Index is the logical disk's place after MAX is moved last; the md
	// device is /dev/md<Index> (or the next free one).
	Index   int
	Disk    LogicalDisk
	Members []string // partitions: /dev/sda1, /dev/sdb1
}

// Plan is the partitions and arrays a configuration makes.
type Plan struct {
	Label  string // "gpt" or "msdos"
	Start  int64  // bytes before the first RAID partition on every disk
	Tables map[string][]disk.PartSpec
	Arrays []Array
}

// MakePlan lays out lds (with per from Members) as IPA does: the logical
// disk of size MAX moved last; on each disk the RAID partitions one after
// the other from Start, the first ending at its size in GiB from the start
// of the disk (so it is Start smaller than asked, as IPA's parted calls
// make it), the next ones exactly their size, MAX to the end. bootMode is
// "uefi" or "bios"; label "" means gpt for uefi, msdos for bios. sizes are
// the disks' sizes in bytes, to refuse what cannot fit before anything is
// written.
func MakePlan(bootMode, label string, lds []LogicalDisk, per [][]string, sizes map[string]int64) (Plan, error) {
	if label == "" {
		label = "msdos"
		if bootMode == "uefi" {
			label = "gpt"
		}
	}
	if bootMode == "uefi" && label != "gpt" {
		return Plan{}, fmt.Errorf("disk label %s: UEFI boot from software RAID needs gpt", label)
	}
	if label != "gpt" && label != "msdos" {
		return Plan{}, fmt.Errorf("disk label %q: want gpt or msdos", label)
	}
	p := Plan{Label: label, Tables: map[string][]disk.PartSpec{}}
	switch {
	case bootMode == "uefi":
		p.Start = uefiStartMiB * mib
	case label == "gpt":
		p.Start = gptBIOSStartMB * mib
	default:
		p.Start = mbrStartMiB * mib
	}
	type item struct {
		ld      LogicalDisk
		members []string
	}
	var order []item
	var last *item
	for i, ld := range lds {
		if ld.Max {
			last = &item{ld, per[i]}
			continue
		}
		order = append(order, item{ld, per[i]})
	}
	if last != nil {
		order = append(order, *last)
	}
	// The room before the RAID partitions gets what booting from the
	// members needs: an ESP on each (UEFI; install_bootloader mirrors the
	// image's ESP onto them as an md RAID-1 with metadata 1.0, which
	// firmware reads as plain FAT) or a BIOS boot partition for GRUB (BIOS
	// on GPT). IPA makes the same partitions in the same room later, at
	// install_bootloader; made here, they exist whatever controller follows.
	var boot *disk.PartSpec
	switch {
	case bootMode == "uefi":
		boot = &disk.PartSpec{Start: mib, Size: ESPSizeMiB * mib, GPTType: disk.GPTTypeESP, Name: "uefi-holder"}
	case label == "gpt":
		boot = &disk.PartSpec{Start: mib, Size: (gptBIOSStartMB - 1) * mib, GPTType: disk.GPTTypeBIOSBoot, Name: "bios-boot"}
	}
	if boot != nil {
		for _, members := range per {
			for _, dev := range members {
				if len(p.Tables[dev]) == 0 {
					p.Tables[dev] = []disk.PartSpec{*boot}
				}
			}
		}
	}
	next := map[string]int64{}
	gptType, mbrType := disk.GPTTypeLinuxRAID, byte(disk.MBRTypeLinuxRAID)
	for idx, it := range order {
		a := Array{Index: idx, Disk: it.ld}
		for _, dev := range it.members {
			start, first := next[dev], false
			if start == 0 {
				start, first = p.Start, true
			}
			var size int64
			if !it.ld.Max {
				end := start + it.ld.SizeGB*gib
				if first {
					end = it.ld.SizeGB * gib
				}
				if end <= start {
					return Plan{}, fmt.Errorf("logical disk of %d GiB on %s: it must be larger than the %d MiB left before it", it.ld.SizeGB, dev, start/mib)
				}
				size = end - start
			}
			if sz, ok := sizes[dev]; ok {
				usable := sz - mib // backup GPT, rounding
				if start+size > usable || (size == 0 && usable-start < mib) {
					return Plan{}, fmt.Errorf("logical disk %d (%s GiB) does not fit on %s: %d MiB of %d MiB used before it", idx, sizeString(it.ld), dev, start/mib, sz/mib)
				}
			}
			p.Tables[dev] = append(p.Tables[dev], disk.PartSpec{Start: start, Size: size, GPTType: gptType, MBRType: mbrType,
				Name: fmt.Sprintf("raid-%d", idx)})
			next[dev] = start + size
			if size == 0 {
				next[dev] = -1 // nothing fits after a MAX partition
			}
			a.Members = append(a.Members, disk.PartitionPath(dev, len(p.Tables[dev])))
		}
		p.Arrays = append(p.Arrays, a)
	}
	return p, nil
}

func sizeString(ld LogicalDisk) string {
	if ld.Max {
		return "MAX"
	}
	return fmt.Sprint(ld.SizeGB)
}

// mdadmLevel is the level as mdadm spells it.
func mdadmLevel(l string) string {
	if l == "1+0" {
		return "10"
	}
	return l
}
