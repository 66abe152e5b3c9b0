package disk

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"unicode/utf16"
)

// Layout is the partition table made for a partition image, in MiB; a size
// of 0 leaves the partition out, except RootMB where 0 means the rest of
// the disk. Partitions are laid out in IPA's (ironic-lib's make_partitions)
// order: ESP, BIOS boot, ephemeral, swap, config drive, and the root last
// so that cloud-init's growpart can grow it to the end of the disk.
type Layout struct {
	Label         string // "gpt" or "msdos"
	ESPMB         int64
	BIOSBootMB    int64
	EphemeralMB   int64
	SwapMB        int64
	ConfigDriveMB int64
	RootMB        int64
	BootFlag      bool // mark the root active (BIOS boot from an MBR disk)
}

// Sizes IPA uses (ironic-lib's efi_system_partition_size and
// bios_boot_partition_size).
const (
	DefaultESPMB      = 200
	DefaultBIOSBootMB = 1
)

// LayoutFor is ironic-lib's make_partitions decision: an MBR for BIOS and a
// GPT for UEFI unless disk_label says otherwise; with local boot an ESP
// (UEFI) or, on a GPT disk booted by BIOS, a BIOS boot partition for GRUB.
func LayoutFor(bootMode, bootOption, diskLabel string, rootMB, swapMB, ephemeralMB, configDriveMB int64) (Layout, error) {
	if bootMode == "" {
		bootMode = "bios"
	}
	if bootOption == "" {
		bootOption = "local"
	}
	if bootMode != "bios" && bootMode != "uefi" {
		return Layout{}, fmt.Errorf("boot mode %q: want bios or uefi", bootMode)
	}
	if bootOption != "local" && bootOption != "netboot" {
		return Layout{}, fmt.Errorf("boot option %q: want local or netboot", bootOption)
	}
	l := Layout{Label: diskLabel, RootMB: rootMB, SwapMB: swapMB, EphemeralMB: ephemeralMB, ConfigDriveMB: configDriveMB}
	switch {
	case l.Label == "" && bootMode == "uefi":
		l.Label = "gpt"
	case l.Label == "":
		l.Label = "msdos"
	case l.Label != "gpt" && l.Label != "msdos":
		return Layout{}, fmt.Errorf("disk label %q: want gpt or msdos", l.Label)
	}
	if rootMB < 0 || swapMB < 0 || ephemeralMB < 0 || configDriveMB < 0 {
		return Layout{}, fmt.Errorf("negative partition size")
	}
	local := bootOption == "local"
	if local && bootMode == "uefi" {
		l.ESPMB = DefaultESPMB
	}
	if local && bootMode == "bios" && l.Label == "gpt" {
		l.BIOSBootMB = DefaultBIOSBootMB
	}
	l.BootFlag = local && bootMode == "bios" && l.Label == "msdos"
	return l, nil
}

// Made is the partitions MakePartitions created; Number is 0 for those the
// layout left out.
type Made struct {
	ESP, BIOSBoot, Ephemeral, Swap, ConfigDrive, Root Partition
}

type slot struct {
	p       *Partition
	mb      int64
	gptType string
	mbrType byte
	name    string
}

// MakePartitions writes a new partition table with l's partitions on dev,
// replacing whatever table it had (erase its metadata first), and makes the
// kernel's partition devices match.
func MakePartitions(ctx context.Context, g Guard, dev string, l Layout) (Made, error) {
	if err := g.Check(dev); err != nil {
		return Made{}, err
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return Made{}, fmt.Errorf("make partitions on %s: %w", dev, err)
	}
	defer f.Close()
	size, err := deviceSize(f)
	if err != nil {
		return Made{}, err
	}
	ss := int64(sectorSize(f))
	var m Made
	slots := []slot{
		{&m.ESP, l.ESPMB, GPTTypeESP, 0xef, "EFI System Partition"},
		{&m.BIOSBoot, l.BIOSBootMB, GPTTypeBIOSBoot, 0, "BIOS boot partition"},
		{&m.Ephemeral, l.EphemeralMB, GPTTypeLinuxData, 0x83, "ephemeral0"},
		{&m.Swap, l.SwapMB, GPTTypeLinuxSwap, 0x82, "swap1"},
		{&m.ConfigDrive, l.ConfigDriveMB, GPTTypeLinuxData, 0x83, ConfigDriveLabel},
		{&m.Root, l.RootMB, GPTTypeLinuxData, 0x83, "root"},
	}
	// Usable space: after the first MiB; before the backup GPT (or, for an
	// MBR, the end of the disk or of what 32-bit LBAs reach).
	end := size
	if l.Label == "gpt" {
		end = size - 33*ss
	} else {
		end = min(end, (1<<32-1)*ss)
	}
	end = end / alignBytes * alignBytes
	pos := int64(alignBytes)
	var used []slot
	for _, s := range slots {
		if s.mb == 0 && s.p != &m.Root {
			continue
		}
		if l.Label == "msdos" && s.mbrType == 0 {
			return Made{}, fmt.Errorf("make partitions on %s: a %s needs a GPT disk", dev, s.name)
		}
		n := s.mb << 20
		if s.p == &m.Root && n == 0 {
			n = end - pos
		}
		if n <= 0 || pos+n > end {
			return Made{}, fmt.Errorf("make partitions on %s: no room for a %d MiB %s partition: %d of %d bytes used", dev, s.mb, s.name, pos, size)
		}
		*s.p = Partition{Number: len(used) + 1, Start: pos, Size: n, Name: s.name}
		if l.Label == "gpt" {
			s.p.Type = s.gptType
		} else {
			s.p.Type = fmt.Sprintf("0x%02x", s.mbrType)
		}
		used = append(used, s)
		pos += n
	}
	if l.Label == "msdos" && len(used) > 4 {
		return Made{}, fmt.Errorf("make partitions on %s: %d partitions do not fit an MBR's 4 primary entries", dev, len(used))
	}
	switch l.Label {
	case "gpt":
		err = writeNewGPT(f, size, ss, used)
	case "msdos":
		err = writeNewMBR(f, ss, used, l.BootFlag)
	default:
		err = fmt.Errorf("disk label %q: want gpt or msdos", l.Label)
	}
	if err != nil {
		return Made{}, fmt.Errorf("make partitions on %s: %w", dev, err)
	}
	if isBlockDevice(f) {
		if err := rereadFile(ctx, f); err != nil {
			return Made{}, fmt.Errorf("make partitions on %s: %w", dev, err)
		}
	}
	t, err := readTable(f)
	if err != nil {
		return Made{}, fmt.Errorf("make partitions on %s: read back: %w", dev, err)
	}
	for _, s := range used {
		for _, p := range t.Partitions {
			if p.Number == s.p.Number {
				s.p.UUID = p.UUID
			}
		}
	}
	return m, nil
}

func writeNewGPT(f *os.File, size, ss int64, parts []slot) error {
	entrySize, numEntries := int64(128), int64(128)
	h := make([]byte, ss)
	copy(h, "EFI PART")
	binary.LittleEndian.PutUint32(h[8:], 0x00010000)
	binary.LittleEndian.PutUint32(h[12:], 92)
	g := &gpt{ss: int(ss), primary: gptHeader{
		sector:      h,
		firstUsable: uint64(2 + (entrySize*numEntries+ss-1)/ss),
		diskGUID:    randomGUID(),
		entriesLBA:  2,
		numEntries:  uint32(numEntries),
		entrySize:   uint32(entrySize),
	}, entries: make([]byte, entrySize*numEntries)}
	for i, s := range parts {
		e := g.entries[int64(i)*entrySize : int64(i+1)*entrySize]
		typ, err := guidBytes(s.gptType)
		if err != nil {
			return err
		}
		copy(e[0:16], typ)
		copy(e[16:32], randomGUID())
		binary.LittleEndian.PutUint64(e[32:40], uint64(s.p.Start/ss))
		binary.LittleEndian.PutUint64(e[40:48], uint64((s.p.Start+s.p.Size)/ss-1))
		for j, c := range utf16.Encode([]rune(s.name)) {
			if j < 36 {
				binary.LittleEndian.PutUint16(e[56+2*j:], c)
			}
		}
	}
	// The protective MBR first: write then sizes its 0xEE entry.
	mbr := make([]byte, 512)
	e := mbr[446:462]
	copy(e[1:4], []byte{0x00, 0x02, 0x00})
	e[4] = mbrTypeProtective
	copy(e[5:8], []byte{0xff, 0xff, 0xff})
	binary.LittleEndian.PutUint32(e[8:12], 1)
	mbr[510], mbr[511] = 0x55, 0xaa
	if _, err := f.WriteAt(mbr, 0); err != nil {
		return fmt.Errorf("write protective MBR: %w", err)
	}
	return g.write(f, size)
}

func writeNewMBR(f *os.File, ss int64, parts []slot, bootFlag bool) error {
	b := make([]byte, 512)
	copy(b[440:444], randomGUID()[:4]) // disk signature
	for i, s := range parts {
		e := b[446+16*i : 446+16*(i+1)]
		if bootFlag && strings.EqualFold(s.name, "root") {
			e[0] = 0x80
		}
		copy(e[1:4], []byte{0xfe, 0xff, 0xff})
		e[4] = s.mbrType
		copy(e[5:8], []byte{0xfe, 0xff, 0xff})
		binary.LittleEndian.PutUint32(e[8:12], uint32(s.p.Start/ss))
		binary.LittleEndian.PutUint32(e[12:16], uint32(s.p.Size/ss))
	}
	b[510], b[511] = 0x55, 0xaa
	if _, err := f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("write MBR: %w", err)
	}
	return f.Sync()
}
