package disk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// FilesystemUUID reads the UUID blkid reports for the filesystem at the
// start of r: ext2/3/4, XFS and btrfs UUIDs, FAT volume ids ("ABCD-1234").
// ok is false for anything else. IPA reports the root partition of a
// partition image by this UUID.
func FilesystemUUID(r io.ReaderAt) (uuid string, ok bool) {
	b := make([]byte, 128)
	if _, err := r.ReadAt(b, 1024); err == nil && binary.LittleEndian.Uint16(b[56:]) == 0xef53 {
		return uuidString(b[104:120]), true
	}
	if _, err := r.ReadAt(b, 0); err == nil && string(b[:4]) == "XFSB" {
		return uuidString(b[32:48]), true
	}
	if _, err := r.ReadAt(b, 0x10000); err == nil && string(b[64:72]) == "_BHRfS_M" {
		return uuidString(b[32:48]), true
	}
	s := make([]byte, 512)
	if _, err := r.ReadAt(s, 0); err == nil && s[510] == 0x55 && s[511] == 0xaa {
		var id []byte
		switch {
		case bytes.Equal(s[0x52:0x57], []byte("FAT32")):
			id = s[0x43:0x47]
		case bytes.Equal(s[0x36:0x39], []byte("FAT")):
			id = s[0x27:0x2b]
		}
		if id != nil {
			v := binary.LittleEndian.Uint32(id)
			return fmt.Sprintf("%04X-%04X", v>>16, v&0xffff), true
		}
	}
	return "", false
}

func uuidString(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// MakeSwap writes a Linux swap signature (version 1, as mkswap) over the
// whole of dev, labelled label.
func MakeSwap(g Guard, dev, label string) error {
	if err := g.Check(dev); err != nil {
		return err
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("make swap on %s: %w", dev, err)
	}
	defer f.Close()
	size, err := deviceSize(f)
	if err != nil {
		return err
	}
	page := int64(os.Getpagesize())
	if size < 10*page {
		return fmt.Errorf("make swap on %s: %d bytes is too small", dev, size)
	}
	h := make([]byte, page)
	le := binary.LittleEndian
	le.PutUint32(h[1024:], 1)                   // version
	le.PutUint32(h[1028:], uint32(size/page-1)) // last page
	copy(h[1036:1052], randomGUID())            // uuid
	copy(h[1052:1068], label)                   // volume name
	copy(h[page-10:], "SWAPSPACE2")
	if _, err := f.WriteAt(h, 0); err != nil {
		return fmt.Errorf("make swap on %s: %w", dev, err)
	}
	return f.Sync()
}
