package erase

import (
	"encoding/binary"
	"fmt"
)

// ParseNVMeIdentify reads the erase capabilities from the 4096-byte NVMe
// Identify Controller (CNS 1) and Identify Namespace (CNS 0) structures.
func ParseNVMeIdentify(nsid uint32, ctrl, ns []byte) (NVMeCaps, error) {
	if len(ctrl) < 4096 || len(ns) < 4096 {
		return NVMeCaps{}, fmt.Errorf("NVMe identify data is %d/%d bytes, want 4096", len(ctrl), len(ns))
	}
	oacs := binary.LittleEndian.Uint16(ctrl[256:258])
	sanicap := binary.LittleEndian.Uint32(ctrl[328:332])
	oncs := binary.LittleEndian.Uint16(ctrl[520:522])
	fna := ctrl[524]
	flbas := ns[26]
	dps := ns[29]
	return NVMeCaps{
		NSID:                nsid,
		SanitizeCrypto:      sanicap&1 != 0,
		SanitizeBlock:       sanicap&2 != 0,
		SanitizeOverwrite:   sanicap&4 != 0,
		Format:              oacs&2 != 0,
		FormatCrypto:        fna&4 != 0,
		FormatAllNamespaces: fna&3 != 0,
		Deallocate:          oncs&4 != 0,
		DeallocateZeroes:    ns[33]&7 == 1,
		LBAFormat:           flbas&0x0f | (flbas>>5&3)<<4,
		MetadataAtEnd:       flbas&0x10 != 0,
		ProtectionInfo:      dps & 7,
		ProtectionFirst:     dps&8 != 0,
	}, nil
}

// ParseATAIdentify reads the security and TRIM words of the 512-byte ATA
// IDENTIFY DEVICE data.
func ParseATAIdentify(id []byte) (ATACaps, error) {
	if len(id) < 512 {
		return ATACaps{}, fmt.Errorf("ATA identify data is %d bytes, want 512", len(id))
	}
	w := func(n int) uint16 { return binary.LittleEndian.Uint16(id[2*n:]) }
	sec := w(128)
	minutes := func(v uint16) int {
		v &= 0xff
		if v == 255 {
			return 508 // "more than 508 minutes"
		}
		return int(v) * 2
	}
	return ATACaps{
		SecuritySupported:    sec&1 != 0,
		SecurityEnabled:      sec&2 != 0,
		Locked:               sec&4 != 0,
		Frozen:               sec&8 != 0,
		CountExpired:         sec&16 != 0,
		EnhancedErase:        sec&32 != 0,
		EraseMinutes:         minutes(w(89)),
		EnhancedEraseMinutes: minutes(w(90)),
		Trim:                 w(169)&1 != 0,
		TrimDeterministic:    w(69)&(1<<14) != 0,
		TrimZeroes:           w(69)&(1<<5) != 0,
	}, nil
}
