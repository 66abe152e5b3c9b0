package disk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"unicode/utf16"
)

// Partition is one entry of a disk's partition table.
type Partition struct {
	Number int   // 1-based, as in /dev/sda1
	Start  int64 // bytes from the start of the disk
	Size   int64 // bytes
	// Type is the GPT type GUID in upper case ("C12A7328-…"), or the MBR
	// type byte as "0x83".
	Type string
	// UUID is the PARTUUID blkid reports: the GPT unique partition GUID in
	// lower case, or "<disk signature>-<NN>" on MBR disks.
	UUID string
	// Name is the GPT partition name ("config-2"), empty on MBR; in
	// KernelPartitions' answer, the kernel's device name ("sda1").
	Name string
}

// Table is a disk's partition table.
type Table struct {
	Type       string // "gpt" or "dos", as blkid's PTTYPE
	DiskID     string // GPT disk GUID (lower case) or MBR signature ("1234abcd")
	SectorSize int    // logical sector size used for LBAs
	Partitions []Partition
}

// Well-known partition types.
const (
	GPTTypeESP        = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
	GPTTypeBIOSBoot   = "21686148-6449-6E6F-744E-656564454649"
	GPTTypeLinuxData  = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
	GPTTypeLinuxSwap  = "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"
	GPTTypePReP       = "9E1A2D38-C612-4316-AA26-8B49521E5A8B"
	MBRTypeESP        = "0xef"
	mbrTypeProtective = 0xee
)

// gptRootTypes are the Discoverable Partitions Specification root types:
// when an image marks its root this way, that partition is the root.
var gptRootTypes = map[string]bool{
	"44479540-F297-41B2-9AF7-D131D5F0458A": true, // x86
	"4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709": true, // x86-64
	"69DAD710-2CE4-4E3C-B16C-21A1D49ABED3": true, // arm
	"B921B045-1DF0-41C3-AF44-4C6F280D3FAE": true, // arm64
	"72EC70A6-CF74-40E6-BD49-4BDA08E8F224": true, // riscv64
	"1DE3F1EF-FA98-47B5-8DCD-4A860A654D78": true, // ppc64le
}

// ErrNoTable is returned when a disk has neither a valid GPT nor an MBR.
var ErrNoTable = errors.New("no partition table")

// ReadTable reads the GPT (falling back to the backup copy when the
// primary is damaged) or else the MBR of dev, which may be a block device
// or a disk image file.
func ReadTable(dev string) (Table, error) {
	f, err := os.Open(dev)
	if err != nil {
		return Table{}, fmt.Errorf("read partition table of %s: %w", dev, err)
	}
	defer f.Close()
	t, err := readTable(f)
	if err != nil {
		return Table{}, fmt.Errorf("read partition table of %s: %w", dev, err)
	}
	return t, nil
}

func readTable(f *os.File) (Table, error) {
	size, err := deviceSize(f)
	if err != nil {
		return Table{}, err
	}
	return ReadTableFrom(f, size, sectorSize(f))
}

// ReadTableFrom reads a partition table from any reader of a disk of size
// bytes with the given logical sector size. It returns an error wrapping
// ErrNoTable when there is neither a GPT nor an MBR partition table.
func ReadTableFrom(r io.ReaderAt, size int64, sectorSize int) (Table, error) {
	g, err := readGPT(r, sectorSize, size)
	if err == nil {
		return g.table(), nil
	}
	m, merr := readMBR(r, sectorSize)
	if merr != nil {
		return Table{}, ErrNoTable
	}
	if m.protective {
		return Table{}, fmt.Errorf("protective MBR but no valid GPT: %w", err)
	}
	return m.table, nil
}

func deviceSize(f *os.File) (int64, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", f.Name(), err)
	}
	return size, nil
}

// --- GPT ---

type gptHeader struct {
	sector      []byte // the header sector as read, written back with new fields
	myLBA       uint64
	altLBA      uint64
	firstUsable uint64
	lastUsable  uint64
	diskGUID    []byte
	entriesLBA  uint64
	numEntries  uint32
	entrySize   uint32
	entriesCRC  uint32
}

type gpt struct {
	ss      int
	primary gptHeader
	entries []byte
	backup  *gptHeader // nil when the backup header is missing or invalid at the last LBA
	// fromBackup is set when the primary was damaged and this table was
	// read from the backup copy.
	fromBackup bool
}

func parseGPTHeader(b []byte) (gptHeader, error) {
	if !bytes.Equal(b[:8], []byte("EFI PART")) {
		return gptHeader{}, errors.New("no GPT signature")
	}
	hsize := binary.LittleEndian.Uint32(b[12:16])
	if hsize < 92 || int(hsize) > len(b) {
		return gptHeader{}, fmt.Errorf("GPT header size %d invalid", hsize)
	}
	crc := binary.LittleEndian.Uint32(b[16:20])
	tmp := bytes.Clone(b[:hsize])
	binary.LittleEndian.PutUint32(tmp[16:20], 0)
	if crc32.ChecksumIEEE(tmp) != crc {
		return gptHeader{}, errors.New("GPT header CRC mismatch")
	}
	h := gptHeader{
		sector:      bytes.Clone(b),
		myLBA:       binary.LittleEndian.Uint64(b[24:32]),
		altLBA:      binary.LittleEndian.Uint64(b[32:40]),
		firstUsable: binary.LittleEndian.Uint64(b[40:48]),
		lastUsable:  binary.LittleEndian.Uint64(b[48:56]),
		diskGUID:    bytes.Clone(b[56:72]),
		entriesLBA:  binary.LittleEndian.Uint64(b[72:80]),
		numEntries:  binary.LittleEndian.Uint32(b[80:84]),
		entrySize:   binary.LittleEndian.Uint32(b[84:88]),
		entriesCRC:  binary.LittleEndian.Uint32(b[88:92]),
	}
	if h.entrySize < 128 || h.entrySize > 1024 || h.entrySize%8 != 0 || h.numEntries == 0 || h.numEntries > 4096 {
		return gptHeader{}, fmt.Errorf("GPT entry array %d×%d invalid", h.numEntries, h.entrySize)
	}
	return h, nil
}

// bytes renders the header with its current fields and a fresh CRC.
func (h gptHeader) bytes() []byte {
	b := bytes.Clone(h.sector)
	binary.LittleEndian.PutUint64(b[24:32], h.myLBA)
	binary.LittleEndian.PutUint64(b[32:40], h.altLBA)
	binary.LittleEndian.PutUint64(b[40:48], h.firstUsable)
	binary.LittleEndian.PutUint64(b[48:56], h.lastUsable)
	copy(b[56:72], h.diskGUID)
	binary.LittleEndian.PutUint64(b[72:80], h.entriesLBA)
	binary.LittleEndian.PutUint32(b[80:84], h.numEntries)
	binary.LittleEndian.PutUint32(b[84:88], h.entrySize)
	binary.LittleEndian.PutUint32(b[88:92], h.entriesCRC)
	hsize := binary.LittleEndian.Uint32(b[12:16])
	binary.LittleEndian.PutUint32(b[16:20], 0)
	binary.LittleEndian.PutUint32(b[16:20], crc32.ChecksumIEEE(b[:hsize]))
	return b
}

func (h gptHeader) entriesBytes() int64 { return int64(h.numEntries) * int64(h.entrySize) }

func readGPTAt(r io.ReaderAt, ss int, lba uint64) (gptHeader, []byte, error) {
	b := make([]byte, ss)
	if _, err := r.ReadAt(b, int64(lba)*int64(ss)); err != nil {
		return gptHeader{}, nil, fmt.Errorf("read GPT header at LBA %d: %w", lba, err)
	}
	h, err := parseGPTHeader(b)
	if err != nil {
		return gptHeader{}, nil, fmt.Errorf("GPT header at LBA %d: %w", lba, err)
	}
	if h.myLBA != lba {
		return gptHeader{}, nil, fmt.Errorf("GPT header at LBA %d says it is at LBA %d", lba, h.myLBA)
	}
	entries := make([]byte, h.entriesBytes())
	if _, err := r.ReadAt(entries, int64(h.entriesLBA)*int64(ss)); err != nil {
		return gptHeader{}, nil, fmt.Errorf("read GPT entries at LBA %d: %w", h.entriesLBA, err)
	}
	if crc32.ChecksumIEEE(entries) != h.entriesCRC {
		return gptHeader{}, nil, fmt.Errorf("GPT entries at LBA %d: CRC mismatch", h.entriesLBA)
	}
	return h, entries, nil
}

// readGPT reads the primary GPT, or the backup at the last LBA when the
// primary is damaged (the backup is then presented as the primary would be).
func readGPT(r io.ReaderAt, ss int, size int64) (*gpt, error) {
	if ss < 512 || size < 3*int64(ss) {
		return nil, fmt.Errorf("disk of %d bytes too small for a GPT", size)
	}
	last := uint64(size/int64(ss)) - 1
	h, entries, perr := readGPTAt(r, ss, 1)
	if perr != nil {
		bh, bentries, berr := readGPTAt(r, ss, last)
		if berr != nil {
			return nil, fmt.Errorf("%v; backup: %v", perr, berr)
		}
		p := bh
		p.myLBA, p.altLBA, p.entriesLBA = 1, last, 2
		return &gpt{ss: ss, primary: p, entries: bentries, backup: &bh, fromBackup: true}, nil
	}
	g := &gpt{ss: ss, primary: h, entries: entries}
	if bh, _, err := readGPTAt(r, ss, last); err == nil && h.altLBA == last {
		g.backup = &bh
	}
	return g, nil
}

func (g *gpt) table() Table {
	t := Table{Type: "gpt", DiskID: guidString(g.primary.diskGUID), SectorSize: g.ss}
	es := int(g.primary.entrySize)
	for i := 0; i < int(g.primary.numEntries); i++ {
		e := g.entries[i*es : (i+1)*es]
		if allZero(e[:16]) {
			continue
		}
		first := binary.LittleEndian.Uint64(e[32:40])
		last := binary.LittleEndian.Uint64(e[40:48])
		t.Partitions = append(t.Partitions, Partition{
			Number: i + 1,
			Start:  int64(first) * int64(g.ss),
			Size:   int64(last-first+1) * int64(g.ss),
			Type:   strings.ToUpper(guidString(e[0:16])),
			UUID:   guidString(e[16:32]),
			Name:   utf16Name(e[56:128]),
		})
	}
	return t
}

// guidString formats a GPT GUID: the first three fields are little-endian.
func guidString(b []byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x",
		binary.LittleEndian.Uint32(b[0:4]), binary.LittleEndian.Uint16(b[4:6]),
		binary.LittleEndian.Uint16(b[6:8]), b[8:10], b[10:16])
}

// guidBytes is the inverse of guidString.
func guidBytes(s string) ([]byte, error) {
	var a uint32
	var b, c uint16
	var d, e []byte
	s = strings.ReplaceAll(s, "-", "")
	if len(s) != 32 {
		return nil, fmt.Errorf("GUID %q malformed", s)
	}
	raw := make([]byte, 16)
	if _, err := fmt.Sscanf(s, "%08x%04x%04x%4x%12x", &a, &b, &c, &d, &e); err != nil {
		return nil, fmt.Errorf("GUID %q malformed: %w", s, err)
	}
	binary.LittleEndian.PutUint32(raw[0:4], a)
	binary.LittleEndian.PutUint16(raw[4:6], b)
	binary.LittleEndian.PutUint16(raw[6:8], c)
	copy(raw[8:10], d)
	copy(raw[10:16], e)
	return raw, nil
}

func utf16Name(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// --- MBR ---

type mbr struct {
	sector     []byte
	protective bool
	table      Table
}

func readMBR(r io.ReaderAt, ss int) (*mbr, error) {
	b := make([]byte, 512)
	if _, err := r.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read MBR: %w", err)
	}
	if b[510] != 0x55 || b[511] != 0xaa {
		return nil, ErrNoTable
	}
	sig := binary.LittleEndian.Uint32(b[440:444])
	m := &mbr{sector: b, table: Table{Type: "dos", DiskID: fmt.Sprintf("%08x", sig), SectorSize: ss}}
	for i := 0; i < 4; i++ {
		e := b[446+16*i : 446+16*(i+1)]
		typ := e[4]
		start := binary.LittleEndian.Uint32(e[8:12])
		n := binary.LittleEndian.Uint32(e[12:16])
		if e[0] != 0 && e[0] != 0x80 {
			return nil, ErrNoTable // a boot sector (FAT, …), not a partition table
		}
		if typ == 0 || n == 0 {
			continue
		}
		if typ == mbrTypeProtective {
			m.protective = true
		}
		m.table.Partitions = append(m.table.Partitions, Partition{
			Number: i + 1,
			Start:  int64(start) * int64(ss),
			Size:   int64(n) * int64(ss),
			Type:   fmt.Sprintf("0x%02x", typ),
			UUID:   fmt.Sprintf("%08x-%02d", sig, i+1),
		})
	}
	return m, nil
}

// GUIDBytes returns a GUID ("c12a7328-f81f-…", any case) in the mixed-endian
// byte order GPT and EFI device paths store it in.
func GUIDBytes(s string) ([16]byte, error) {
	var out [16]byte
	b, err := guidBytes(s)
	if err != nil {
		return out, err
	}
	copy(out[:], b)
	return out, nil
}
