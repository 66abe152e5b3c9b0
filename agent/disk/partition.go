package disk

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"unicode/utf16"
)

// BootUUIDs is what get_partition_uuids reports after an image is written.
type BootUUIDs struct {
	DiskID     string // the table's PTUUID: GPT disk GUID or MBR signature
	Root       string // PARTUUID of the root partition
	EFI        string // PARTUUID of the EFI system partition, "" when there is none
	RootNumber int
	EFINumber  int // 0 when there is no ESP
}

// PartitionUUIDs finds the root and EFI system partitions of the image on
// dev. The ESP is the partition with the ESP type (GPT type GUID or MBR
// type 0xEF). The root is the partition typed as a discoverable root
// (systemd's root type GUIDs) if any, else the largest partition that is
// not an ESP, BIOS boot, PReP, swap, extended or config-2 partition; Root is
// empty when no partition qualifies (an ESP-only image).
func PartitionUUIDs(dev string) (BootUUIDs, error) {
	t, err := ReadTable(dev)
	if err != nil {
		return BootUUIDs{}, fmt.Errorf("partition UUIDs of %s: %w", dev, err)
	}
	if len(t.Partitions) == 0 {
		return BootUUIDs{}, fmt.Errorf("partition UUIDs of %s: the %s partition table has no partitions", dev, t.Type)
	}
	u := BootUUIDs{DiskID: t.DiskID}
	var root, typedRoot *Partition
	for i := range t.Partitions {
		p := &t.Partitions[i]
		switch {
		case p.Type == GPTTypeESP || p.Type == MBRTypeESP:
			if u.EFI == "" {
				u.EFI, u.EFINumber = p.UUID, p.Number
			}
		case gptRootTypes[p.Type]:
			if typedRoot == nil || p.Size > typedRoot.Size {
				typedRoot = p
			}
		case notRoot(*p):
		default:
			if root == nil || p.Size > root.Size {
				root = p
			}
		}
	}
	if typedRoot != nil {
		root = typedRoot
	}
	if root == nil {
		// A whole-disk image may hold only an ESP (a UKI boots from it):
		// there is no root to report, which is no reason to fail the deploy.
		return u, nil
	}
	u.Root, u.RootNumber = root.UUID, root.Number
	return u, nil
}

func notRoot(p Partition) bool {
	switch p.Type {
	case GPTTypeBIOSBoot, GPTTypePReP, GPTTypeLinuxSwap, "0x82", "0x05", "0x0f", "0x85", "0x41":
		return true
	}
	return strings.EqualFold(p.Name, ConfigDriveLabel)
}

// FixBackupGPT moves the backup GPT of dev to the disk's real last LBA and
// lets the last usable LBA grow with it. A whole-disk image written to a
// disk larger than the image leaves its backup GPT in the middle of the
// disk, where firmware and the kernel call the table corrupt and no new
// partition can use the tail. A damaged primary is rebuilt from the
// backup. It reports whether anything was written; MBR disks and disks
// without a partition table are left alone. Call RereadPartitions afterwards.
func FixBackupGPT(ctx context.Context, g Guard, dev string) (bool, error) {
	if err := g.Check(dev); err != nil {
		return false, err
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("fix backup GPT of %s: %w", dev, err)
	}
	defer f.Close()
	changed, err := fixBackupGPT(f)
	if err != nil {
		return false, fmt.Errorf("fix backup GPT of %s: %w", dev, err)
	}
	return changed, nil
}

func fixBackupGPT(f *os.File) (bool, error) {
	ss := sectorSize(f)
	size, err := deviceSize(f)
	if err != nil {
		return false, err
	}
	g, err := readGPT(f, ss, size)
	if err != nil {
		if m, merr := readMBR(f, ss); merr == nil && m.protective {
			return false, fmt.Errorf("protective MBR but neither GPT copy is valid: %w", err)
		}
		return false, nil // an MBR disk, or no table: nothing to fix
	}
	last := uint64(size/int64(ss)) - 1
	if g.backup != nil && g.primary.altLBA == last && g.primary.myLBA == 1 && !g.fromBackup {
		return false, nil
	}
	return true, g.write(f, size)
}

// write lays out and writes both copies of the table for a disk of size
// bytes: backup entries and header at the end, then the primary, then the
// protective MBR's size; the caller has already set the entries.
func (g *gpt) write(f *os.File, size int64) error {
	ss := int64(g.ss)
	last := uint64(size/ss) - 1
	entrySectors := uint64((g.primary.entriesBytes() + ss - 1) / ss)
	backupEntries := last - entrySectors
	g.primary.myLBA, g.primary.altLBA = 1, last
	g.primary.lastUsable = backupEntries - 1
	g.primary.entriesCRC = crc32.ChecksumIEEE(g.entries)
	for _, p := range g.table().Partitions {
		if end := uint64((p.Start+p.Size)/ss) - 1; end > g.primary.lastUsable {
			return fmt.Errorf("partition %d ends at LBA %d, past the last usable LBA %d of this %d-byte disk: the image is larger than the disk", p.Number, end, g.primary.lastUsable, size)
		}
	}
	backup := g.primary
	backup.myLBA, backup.altLBA, backup.entriesLBA = last, 1, backupEntries
	writes := []struct {
		b    []byte
		lba  uint64
		what string
	}{
		{g.entries, backupEntries, "backup GPT entries"},
		{backup.bytes(), last, "backup GPT header"},
		{g.entries, g.primary.entriesLBA, "primary GPT entries"},
		{g.primary.bytes(), 1, "primary GPT header"},
	}
	for _, w := range writes {
		if _, err := f.WriteAt(w.b, int64(w.lba)*ss); err != nil {
			return fmt.Errorf("write %s at LBA %d: %w", w.what, w.lba, err)
		}
	}
	if err := updateProtectiveMBR(f, last); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}

// updateProtectiveMBR sets the size of the 0xEE entry to cover the disk,
// capped at 2^32-1 sectors as the UEFI spec asks for larger disks.
func updateProtectiveMBR(f *os.File, last uint64) error {
	b := make([]byte, 512)
	if _, err := f.ReadAt(b, 0); err != nil {
		return fmt.Errorf("read protective MBR: %w", err)
	}
	if b[510] != 0x55 || b[511] != 0xaa {
		return nil
	}
	for i := 0; i < 4; i++ {
		e := b[446+16*i : 446+16*(i+1)]
		if e[4] != mbrTypeProtective || binary.LittleEndian.Uint32(e[8:12]) != 1 {
			continue
		}
		n := min(last, 0xffffffff)
		binary.LittleEndian.PutUint32(e[12:16], uint32(n))
		if _, err := f.WriteAt(e, int64(446+16*i)); err != nil {
			return fmt.Errorf("write protective MBR: %w", err)
		}
	}
	return nil
}

// ConfigDriveLabel is the partition name / filesystem label cloud-init and
// Ignition look for.
const ConfigDriveLabel = "config-2"

// MaxConfigDriveSize is the largest config drive IPA writes, and the size
// of the partition made for one.
const MaxConfigDriveSize = 64 << 20

// WriteConfigDrive writes a config drive image (the config-2 ISO9660, at
// most 64 MiB) of size bytes from r onto dev: into the existing config-2
// partition (GPT name or filesystem label config-2) if the image brought
// one, else into a new partition at the end of the disk, created in the
// GPT (named config-2) or the MBR (type 0x83). The GPT's backup copy is
// moved to the end of the disk first. On a block device the kernel is
// asked to re-read the table afterwards. It returns the partition written.
func WriteConfigDrive(ctx context.Context, g Guard, dev string, r io.Reader, size int64) (Partition, error) {
	if size <= 0 || size > MaxConfigDriveSize {
		return Partition{}, fmt.Errorf("write config drive to %s: image is %d bytes, want 1 to %d", dev, size, MaxConfigDriveSize)
	}
	if err := g.Check(dev); err != nil {
		return Partition{}, err
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return Partition{}, fmt.Errorf("write config drive to %s: %w", dev, err)
	}
	defer f.Close()
	p, err := configDrivePartition(f)
	if err != nil {
		return Partition{}, fmt.Errorf("write config drive to %s: %w", dev, err)
	}
	if size > p.Size {
		return Partition{}, fmt.Errorf("write config drive to %s: image is %d bytes, partition %d only %d", dev, size, p.Number, p.Size)
	}
	n, err := io.Copy(io.NewOffsetWriter(f, p.Start), io.LimitReader(r, size))
	if err == nil && n != size {
		err = fmt.Errorf("image ended after %d of %d bytes", n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return Partition{}, fmt.Errorf("write config drive to partition %d of %s: %w", p.Number, dev, err)
	}
	if isBlockDevice(f) {
		if err := rereadFile(ctx, f); err != nil {
			return Partition{}, fmt.Errorf("write config drive to %s: %w", dev, err)
		}
	}
	return p, nil
}

// configDrivePartition finds the config-2 partition or makes one.
func configDrivePartition(f *os.File) (Partition, error) {
	t, err := readTable(f)
	if err != nil {
		return Partition{}, err
	}
	for _, p := range t.Partitions {
		if strings.EqualFold(p.Name, ConfigDriveLabel) || strings.EqualFold(fsLabel(f, p), ConfigDriveLabel) {
			return p, nil
		}
	}
	if t.Type == "gpt" {
		return addGPTConfigDrive(f)
	}
	return addMBRConfigDrive(f)
}

// fsLabel reads the ISO9660 volume id or FAT label at the start of p.
func fsLabel(r io.ReaderAt, p Partition) string {
	b := make([]byte, 32)
	if _, err := r.ReadAt(b, p.Start+0x8000); err == nil && string(b[1:6]) == "CD001" {
		if _, err := r.ReadAt(b, p.Start+0x8000+40); err == nil {
			return strings.TrimRight(string(b), " \x00")
		}
	}
	bs := make([]byte, 512)
	if _, err := r.ReadAt(bs, p.Start); err != nil || bs[510] != 0x55 || bs[511] != 0xaa {
		return ""
	}
	switch {
	case string(bs[0x52:0x57]) == "FAT32":
		return strings.TrimRight(string(bs[0x47:0x52]), " ")
	case string(bs[0x36:0x39]) == "FAT":
		return strings.TrimRight(string(bs[0x2b:0x36]), " ")
	}
	return ""
}

func randomGUID() []byte {
	b := make([]byte, 16)
	rand.Read(b)
	b[7] = b[7]&0x0f | 0x40 // version 4 (the third field is little-endian)
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return b
}

const alignBytes = 1 << 20

func addGPTConfigDrive(f *os.File) (Partition, error) {
	size, err := deviceSize(f)
	if err != nil {
		return Partition{}, err
	}
	g, err := readGPT(f, sectorSize(f), size)
	if err != nil {
		return Partition{}, err
	}
	ss := int64(g.ss)
	// Lay out for the real disk size first, so the tail is usable.
	last := uint64(size/ss) - 1
	entrySectors := uint64((g.primary.entriesBytes() + ss - 1) / ss)
	lastUsable := last - entrySectors - 1
	start := ((int64(lastUsable+1)*ss - MaxConfigDriveSize) / alignBytes * alignBytes) / ss
	end := uint64(start) + MaxConfigDriveSize/uint64(ss) - 1
	slot := -1
	es := int(g.primary.entrySize)
	if start < int64(g.primary.firstUsable) {
		return Partition{}, fmt.Errorf("disk of %d bytes is too small for a %d MiB config drive partition", size, MaxConfigDriveSize>>20)
	}
	for _, p := range g.table().Partitions {
		if end := (p.Start + p.Size) / ss; end > start {
			return Partition{}, fmt.Errorf("no room for a %d MiB config drive partition at the end of the disk: partition %d ends at LBA %d", MaxConfigDriveSize>>20, p.Number, end-1)
		}
	}
	for i := 0; i < int(g.primary.numEntries); i++ {
		if allZero(g.entries[i*es : i*es+16]) {
			slot = i
			break
		}
	}
	if slot < 0 {
		return Partition{}, fmt.Errorf("GPT has no free entry among %d", g.primary.numEntries)
	}
	e := g.entries[slot*es : (slot+1)*es]
	clear(e)
	typ, _ := guidBytes(GPTTypeLinuxData)
	copy(e[0:16], typ)
	copy(e[16:32], randomGUID())
	binary.LittleEndian.PutUint64(e[32:40], uint64(start))
	binary.LittleEndian.PutUint64(e[40:48], end)
	for i, c := range utf16.Encode([]rune(ConfigDriveLabel)) {
		binary.LittleEndian.PutUint16(e[56+2*i:], c)
	}
	if err := g.write(f, size); err != nil {
		return Partition{}, err
	}
	for _, p := range g.table().Partitions {
		if p.Number == slot+1 {
			return p, nil
		}
	}
	return Partition{}, fmt.Errorf("config drive partition %d vanished", slot+1)
}

func addMBRConfigDrive(f *os.File) (Partition, error) {
	ss := int64(sectorSize(f))
	size, err := deviceSize(f)
	if err != nil {
		return Partition{}, err
	}
	m, err := readMBR(f, int(ss))
	if err != nil {
		return Partition{}, err
	}
	total := size / ss
	var maxEnd int64 // first LBA after every partition
	for _, p := range m.table.Partitions {
		maxEnd = max(maxEnd, (p.Start+p.Size)/ss)
	}
	align := alignBytes / ss
	start := (total - MaxConfigDriveSize/ss) / align * align
	count := int64(MaxConfigDriveSize) / ss
	if start+count > 1<<32 {
		// MBR cannot address past 2 TiB: put it right after the last partition.
		start = (maxEnd + align - 1) / align * align
		count = MaxConfigDriveSize / ss
	}
	if start < maxEnd || start < align || start+count > 1<<32 || start+count > total {
		return Partition{}, fmt.Errorf("no room for a %d MiB config drive partition in the MBR (partitions end at LBA %d, disk has %d sectors)", MaxConfigDriveSize>>20, maxEnd, total)
	}
	slot := -1
	for i := 0; i < 4; i++ {
		e := m.sector[446+16*i : 446+16*(i+1)]
		if e[4] == 0 {
			slot = i
			break
		}
	}
	if slot < 0 {
		return Partition{}, fmt.Errorf("MBR has no free primary partition entry")
	}
	e := m.sector[446+16*slot : 446+16*(slot+1)]
	clear(e)
	copy(e[1:4], []byte{0xfe, 0xff, 0xff}) // CHS unused: LBA only
	e[4] = 0x83
	copy(e[5:8], []byte{0xfe, 0xff, 0xff})
	binary.LittleEndian.PutUint32(e[8:12], uint32(start))
	binary.LittleEndian.PutUint32(e[12:16], uint32(count))
	if _, err := f.WriteAt(e, int64(446+16*slot)); err != nil {
		return Partition{}, fmt.Errorf("write MBR entry %d: %w", slot+1, err)
	}
	return Partition{
		Number: slot + 1, Start: start * ss, Size: count * ss, Type: "0x83",
		UUID: fmt.Sprintf("%s-%02d", m.table.DiskID, slot+1),
	}, nil
}

// AfterWriteImage does what IPA does once a whole-disk image is on dev:
// moves the backup GPT to the end of the disk, makes the kernel's
// partitions match the new table, and returns the root and EFI partition
// UUIDs (an image without partitions is an error).
func AfterWriteImage(ctx context.Context, g Guard, dev string) (BootUUIDs, error) {
	if _, err := FixBackupGPT(ctx, g, dev); err != nil {
		return BootUUIDs{}, err
	}
	if err := RereadPartitions(ctx, dev); err != nil {
		return BootUUIDs{}, err
	}
	return PartitionUUIDs(dev)
}
