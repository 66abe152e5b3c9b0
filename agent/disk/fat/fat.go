// Package fat reads files from a FAT12, FAT16 or FAT32 filesystem (an EFI
// system partition) through an io.ReaderAt, without mounting it: the agent
// must find an image's boot loader on ramdisks whose kernel has no vfat, and
// in tests that cannot mount. It only reads, and trusts nothing it reads:
// every cluster number and chain is bounds-checked.
package fat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"unicode/utf16"
)

// FS is an opened FAT filesystem.
type FS struct {
	r           io.ReaderAt
	bits        int // 12, 16 or 32
	clusterSize int64
	fatOff      int64
	fatLen      int64
	rootOff     int64 // FAT12/16 fixed root directory
	rootLen     int64
	rootCluster uint32 // FAT32
	dataOff     int64
	clusters    uint32 // data clusters; valid numbers are 2..clusters+1
}

// Entry is one directory entry.
type Entry struct {
	Name    string // the long name when there is one, else the 8.3 name
	IsDir   bool
	Size    int64
	cluster uint32
}

// Open reads the boot sector of the filesystem in r (size bytes).
func Open(r io.ReaderAt, size int64) (*FS, error) {
	b := make([]byte, 512)
	if _, err := r.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read FAT boot sector: %w", err)
	}
	le := binary.LittleEndian
	if b[510] != 0x55 || b[511] != 0xaa {
		return nil, errors.New("no FAT boot sector signature")
	}
	bps := int64(le.Uint16(b[11:]))
	spc := int64(b[13])
	rsvd := int64(le.Uint16(b[14:]))
	nfats := int64(b[16])
	rootEnts := int64(le.Uint16(b[17:]))
	total := int64(le.Uint16(b[19:]))
	if total == 0 {
		total = int64(le.Uint32(b[32:]))
	}
	fatSz := int64(le.Uint16(b[22:]))
	if fatSz == 0 {
		fatSz = int64(le.Uint32(b[36:]))
	}
	switch {
	case bps != 512 && bps != 1024 && bps != 2048 && bps != 4096:
		return nil, fmt.Errorf("FAT: %d bytes per sector", bps)
	case spc == 0 || spc&(spc-1) != 0:
		return nil, fmt.Errorf("FAT: %d sectors per cluster", spc)
	case rsvd == 0 || nfats == 0 || fatSz == 0 || total == 0:
		return nil, errors.New("FAT: empty geometry in the boot sector")
	case total*bps > size:
		return nil, fmt.Errorf("FAT: %d sectors of %d bytes do not fit the %d-byte partition", total, bps, size)
	}
	rootSecs := (rootEnts*32 + bps - 1) / bps
	meta := rsvd + nfats*fatSz + rootSecs
	if meta >= total {
		return nil, errors.New("FAT: no data region")
	}
	f := &FS{
		r: r, clusterSize: bps * spc,
		fatOff: rsvd * bps, fatLen: fatSz * bps,
		rootOff: (rsvd + nfats*fatSz) * bps, rootLen: rootSecs * bps,
		dataOff: meta * bps, clusters: uint32((total - meta) / spc),
	}
	// The FAT type follows from the cluster count alone (Microsoft's rule).
	switch {
	case f.clusters < 4085:
		f.bits = 12
	case f.clusters < 65525:
		f.bits = 16
	default:
		f.bits = 32
		f.rootCluster = le.Uint32(b[44:])
	}
	if need := (int64(f.clusters) + 2) * int64(f.bits) / 8; need > f.fatLen {
		return nil, fmt.Errorf("FAT%d: table of %d bytes cannot map %d clusters", f.bits, f.fatLen, f.clusters)
	}
	return f, nil
}

// Bits is 12, 16 or 32.
func (f *FS) Bits() int { return f.bits }

// next returns the cluster after c in its chain, or 0 at the end.
func (f *FS) next(c uint32) (uint32, error) {
	var b [4]byte
	var v uint32
	switch f.bits {
	case 12:
		off := int64(c) + int64(c)/2
		if _, err := f.r.ReadAt(b[:2], f.fatOff+off); err != nil {
			return 0, err
		}
		v = uint32(binary.LittleEndian.Uint16(b[:]))
		if c&1 == 1 {
			v >>= 4
		}
		v &= 0xfff
		if v >= 0xff8 {
			return 0, nil
		}
	case 16:
		if _, err := f.r.ReadAt(b[:2], f.fatOff+int64(c)*2); err != nil {
			return 0, err
		}
		v = uint32(binary.LittleEndian.Uint16(b[:]))
		if v >= 0xfff8 {
			return 0, nil
		}
	default:
		if _, err := f.r.ReadAt(b[:], f.fatOff+int64(c)*4); err != nil {
			return 0, err
		}
		v = binary.LittleEndian.Uint32(b[:]) & 0x0fffffff
		if v >= 0x0ffffff8 {
			return 0, nil
		}
	}
	if v < 2 || v > f.clusters+1 {
		return 0, fmt.Errorf("FAT%d: cluster %d links to invalid cluster %#x", f.bits, c, v)
	}
	return v, nil
}

// chain reads the cluster chain starting at c, at most limit bytes.
func (f *FS) chain(c uint32, limit int64) ([]byte, error) {
	var out []byte
	for steps := uint32(0); c != 0 && int64(len(out)) < limit; steps++ {
		if c < 2 || c > f.clusters+1 || steps > f.clusters {
			return nil, fmt.Errorf("FAT%d: bad or looping cluster chain at %d", f.bits, c)
		}
		buf := make([]byte, f.clusterSize)
		if _, err := f.r.ReadAt(buf, f.dataOff+int64(c-2)*f.clusterSize); err != nil {
			return nil, fmt.Errorf("FAT%d: read cluster %d: %w", f.bits, c, err)
		}
		out = append(out, buf...)
		next, err := f.next(c)
		if err != nil {
			return nil, err
		}
		c = next
	}
	return out, nil
}

// maxDir bounds how much of one directory is read.
const maxDir = 4 << 20

func (f *FS) dirBytes(e *Entry) ([]byte, error) {
	if e == nil { // the root
		if f.bits == 32 {
			return f.chain(f.rootCluster, maxDir)
		}
		b := make([]byte, f.rootLen)
		if _, err := f.r.ReadAt(b, f.rootOff); err != nil {
			return nil, fmt.Errorf("FAT%d: read root directory: %w", f.bits, err)
		}
		return b, nil
	}
	if e.cluster == 0 { // ".." of a first-level directory
		return f.dirBytes(nil)
	}
	return f.chain(e.cluster, maxDir)
}

// parseDir decodes directory entries, joining long-name (VFAT) parts.
func parseDir(b []byte, fat32 bool) []Entry {
	var out []Entry
	var lfn []uint16
	var lfnSum byte
	for i := 0; i+32 <= len(b); i += 32 {
		d := b[i : i+32]
		if d[0] == 0 {
			break
		}
		if d[0] == 0xe5 {
			lfn = nil
			continue
		}
		attr := d[11]
		if attr&0x3f == 0x0f { // a long-name part, stored last part first
			seq := int(d[0] & 0x1f)
			if d[0]&0x40 != 0 {
				lfn = make([]uint16, 13*seq)
				lfnSum = d[13]
			}
			if seq == 0 || lfn == nil || 13*seq > len(lfn) || d[13] != lfnSum {
				lfn = nil
				continue
			}
			part := lfn[13*(seq-1):]
			for j, off := range []int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30} {
				part[j] = binary.LittleEndian.Uint16(d[off:])
			}
			continue
		}
		if attr&0x08 != 0 { // volume label
			lfn = nil
			continue
		}
		name := shortName(d)
		if lfn != nil && checksum(d[:11]) == lfnSum {
			n := 0
			for n < len(lfn) && lfn[n] != 0 && lfn[n] != 0xffff {
				n++
			}
			name = string(utf16.Decode(lfn[:n]))
		}
		lfn = nil
		c := uint32(binary.LittleEndian.Uint16(d[26:]))
		if fat32 {
			c |= uint32(binary.LittleEndian.Uint16(d[20:])) << 16
		}
		out = append(out, Entry{Name: name, IsDir: attr&0x10 != 0, Size: int64(binary.LittleEndian.Uint32(d[28:])), cluster: c})
	}
	return out
}

func shortName(d []byte) string {
	base := strings.TrimRight(string(d[0:8]), " ")
	ext := strings.TrimRight(string(d[8:11]), " ")
	if base != "" && base[0] == 0x05 {
		base = "\xe5" + base[1:]
	}
	if d[12]&0x08 != 0 {
		base = strings.ToLower(base)
	}
	if d[12]&0x10 != 0 {
		ext = strings.ToLower(ext)
	}
	if ext == "" {
		return base
	}
	return base + "." + ext
}

func checksum(name []byte) byte {
	var s byte
	for _, c := range name {
		s = (s>>1 | s<<7) + c
	}
	return s
}

// ReadDir lists the directory at path ("" or "/" for the root), without
// "." and "..". Names are matched case-insensitively, as FAT does.
func (f *FS) ReadDir(path string) ([]Entry, error) {
	var dir *Entry
	if p := strings.Trim(path, "/"); p != "" {
		e, err := f.Stat(p)
		if err != nil {
			return nil, err
		}
		if !e.IsDir {
			return nil, fmt.Errorf("%s: not a directory", path)
		}
		dir = &e
	}
	b, err := f.dirBytes(dir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range parseDir(b, f.bits == 32) {
		if e.Name != "." && e.Name != ".." {
			out = append(out, e)
		}
	}
	return out, nil
}

// Stat finds the entry at path ("EFI/BOOT/BOOTX64.EFI"), case-insensitively.
func (f *FS) Stat(path string) (Entry, error) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var dir *Entry
	for i, name := range parts {
		b, err := f.dirBytes(dir)
		if err != nil {
			return Entry{}, err
		}
		found := false
		for _, e := range parseDir(b, f.bits == 32) {
			if strings.EqualFold(e.Name, name) {
				if i < len(parts)-1 && !e.IsDir {
					return Entry{}, fmt.Errorf("%s: %s is not a directory", path, e.Name)
				}
				e := e
				dir, found = &e, true
				break
			}
		}
		if !found {
			return Entry{}, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
		}
	}
	return *dir, nil
}

// ReadFile returns the content of the file at path; files larger than max
// bytes are refused.
func (f *FS) ReadFile(path string, max int64) ([]byte, error) {
	e, err := f.Stat(path)
	if err != nil {
		return nil, err
	}
	if e.IsDir {
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	if e.Size > max {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d allowed", path, e.Size, max)
	}
	if e.Size == 0 {
		return []byte{}, nil
	}
	b, err := f.chain(e.cluster, e.Size)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < e.Size {
		return nil, fmt.Errorf("%s: cluster chain holds %d of %d bytes", path, len(b), e.Size)
	}
	return b[:e.Size], nil
}
