package efi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
)

// LoadOptionActive is LOAD_OPTION_ACTIVE: firmware may boot the entry.
const LoadOptionActive = 0x1

// HardDrive is a hard-drive media device path node (type 4, subtype 1) for a
// GPT partition: what firmware matches against the disks it finds.
type HardDrive struct {
	PartitionNumber uint32
	Start, Size     uint64   // in logical blocks of the disk
	PartitionGUID   [16]byte // the partition's unique GUID, on-disk byte order
}

// LoadOption is an EFI_LOAD_OPTION: the content of a Boot#### variable whose
// device path is HD(…)/File(…), the form efibootmgr writes for a disk.
type LoadOption struct {
	Attributes  uint32
	Description string
	Disk        HardDrive
	Path        string // loader path on the ESP, with backslashes: \EFI\debian\shimx64.efi
	Optional    []byte // passed to the loader; empty for a boot loader entry
}

// Device path node types.
const (
	dpMedia        = 0x04
	dpMediaHD      = 0x01
	dpMediaFile    = 0x04
	dpEnd          = 0x7f
	dpEndEntire    = 0xff
	hdLen          = 42
	mbrTypeGPT     = 0x02
	sigTypeGUID    = 0x02
	maxDescription = 1024
)

// MarshalBinary encodes the load option.
func (o LoadOption) MarshalBinary() ([]byte, error) {
	if o.Description == "" || len(o.Description) > maxDescription {
		return nil, fmt.Errorf("load option description of %d characters", len(o.Description))
	}
	if !strings.HasPrefix(o.Path, `\`) || strings.Contains(o.Path, "/") {
		return nil, fmt.Errorf("loader path %q: want an absolute path with backslashes", o.Path)
	}
	var dp bytes.Buffer
	le := binary.LittleEndian
	hd := make([]byte, hdLen)
	hd[0], hd[1] = dpMedia, dpMediaHD
	le.PutUint16(hd[2:], hdLen)
	le.PutUint32(hd[4:], o.Disk.PartitionNumber)
	le.PutUint64(hd[8:], o.Disk.Start)
	le.PutUint64(hd[16:], o.Disk.Size)
	copy(hd[24:40], o.Disk.PartitionGUID[:])
	hd[40], hd[41] = mbrTypeGPT, sigTypeGUID
	dp.Write(hd)
	path := ucs2(o.Path)
	fp := make([]byte, 4, 4+len(path))
	fp[0], fp[1] = dpMedia, dpMediaFile
	le.PutUint16(fp[2:], uint16(4+len(path)))
	dp.Write(append(fp, path...))
	dp.Write([]byte{dpEnd, dpEndEntire, 4, 0})

	var b bytes.Buffer
	binary.Write(&b, le, o.Attributes)
	binary.Write(&b, le, uint16(dp.Len()))
	b.Write(ucs2(o.Description))
	b.Write(dp.Bytes())
	b.Write(o.Optional)
	return b.Bytes(), nil
}

// ucs2 encodes s as NUL-terminated UTF-16LE.
func ucs2(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(u)+2)
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

// ParseLoadOption decodes a Boot#### variable's data. Options whose device
// path is not HD()/File() (network, firmware applications, a PCI path
// before the HD node) still give their attributes and description; Disk
// and Path are then filled from the first such nodes found, if any.
func ParseLoadOption(b []byte) (LoadOption, error) {
	var o LoadOption
	le := binary.LittleEndian
	if len(b) < 6 {
		return o, errors.New("load option shorter than its header")
	}
	o.Attributes = le.Uint32(b)
	dpLen := int(le.Uint16(b[4:]))
	rest := b[6:]
	end := -1
	for i := 0; i+1 < len(rest); i += 2 {
		if rest[i] == 0 && rest[i+1] == 0 {
			end = i
			break
		}
	}
	if end < 0 {
		return o, errors.New("load option description is not terminated")
	}
	u := make([]uint16, end/2)
	for i := range u {
		u[i] = le.Uint16(rest[2*i:])
	}
	o.Description = string(utf16.Decode(u))
	rest = rest[end+2:]
	if dpLen > len(rest) {
		return o, fmt.Errorf("device path of %d bytes, only %d left", dpLen, len(rest))
	}
	dp := rest[:dpLen]
	o.Optional = rest[dpLen:]
	for len(dp) >= 4 {
		typ, sub, n := dp[0], dp[1], int(le.Uint16(dp[2:]))
		if n < 4 || n > len(dp) {
			return o, fmt.Errorf("device path node of %d bytes", n)
		}
		node := dp[:n]
		switch {
		case typ == dpEnd && sub == dpEndEntire:
			return o, nil
		case typ == dpMedia && sub == dpMediaHD && n == hdLen:
			o.Disk.PartitionNumber = le.Uint32(node[4:])
			o.Disk.Start = le.Uint64(node[8:])
			o.Disk.Size = le.Uint64(node[16:])
			copy(o.Disk.PartitionGUID[:], node[24:40])
		case typ == dpMedia && sub == dpMediaFile && o.Path == "":
			pu := make([]uint16, 0, (n-4)/2)
			for i := 4; i+1 < n; i += 2 {
				c := le.Uint16(node[i:])
				if c == 0 {
					break
				}
				pu = append(pu, c)
			}
			o.Path = string(utf16.Decode(pu))
		}
		dp = dp[n:]
	}
	return o, errors.New("device path has no end node")
}
