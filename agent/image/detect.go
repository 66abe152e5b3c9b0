package image

import "bytes"

// Format is an image's on-the-wire format, as found from its first bytes.
type Format string

// Formats Detect can report. Only raw, qcow2 and raw compressed with gzip,
// zstd or xz are written; the others are recognised so that they are refused
// by name instead of being written to disk as if they were raw.
const (
	FormatRaw   Format = "raw"
	FormatQCOW2 Format = "qcow2"
	FormatGzip  Format = "gzip"
	FormatZstd  Format = "zstd"
	FormatXZ    Format = "xz"
	FormatBzip2 Format = "bzip2"
	FormatVMDK  Format = "vmdk"
	FormatVHDX  Format = "vhdx"
	FormatVPC   Format = "vpc"
	FormatVDI   Format = "vdi"
	FormatQED   Format = "qed"
)

// DetectLen is how many leading bytes Detect needs to tell every format apart.
const DetectLen = 512

// Detect names the format of an image from its first bytes (up to DetectLen);
// anything it does not recognise is raw. Names and URLs are never trusted:
// an operator's "disk.img" is often a qcow2.
func Detect(header []byte) Format {
	has := func(off int, magic string) bool {
		return len(header) >= off+len(magic) && string(header[off:off+len(magic)]) == magic
	}
	switch {
	case has(0, "QFI\xfb"):
		return FormatQCOW2
	case has(0, "\x1f\x8b"):
		return FormatGzip
	case has(0, "\x28\xb5\x2f\xfd"):
		return FormatZstd
	case has(0, "\xfd7zXZ\x00"):
		return FormatXZ
	case has(0, "BZh") && len(header) >= 10 && header[3] >= '1' && header[3] <= '9' &&
		bytes.Equal(header[4:10], []byte{0x31, 0x41, 0x59, 0x26, 0x53, 0x59}):
		return FormatBzip2
	case has(0, "KDMV"), has(0, "# Disk DescriptorFile"):
		return FormatVMDK
	case has(0, "vhdxfile"):
		return FormatVHDX
	case has(0, "conectix"):
		return FormatVPC
	case has(0x40, "\x7f\x10\xda\xbe"):
		return FormatVDI
	case has(0, "QED\x00"):
		return FormatQED
	}
	return FormatRaw
}

// compressed reports whether f is a stream compression wrapped around an image.
func (f Format) compressed() bool {
	return f == FormatGzip || f == FormatZstd || f == FormatXZ
}
