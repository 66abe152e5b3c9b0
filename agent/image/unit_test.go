package image

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	vdi := make([]byte, 0x48)
	copy(vdi[0x40:], "\x7f\x10\xda\xbe")
	for _, tc := range []struct {
		in   []byte
		want Format
	}{
		{[]byte("QFI\xfb\x00\x00\x00\x03"), FormatQCOW2},
		{[]byte("\x1f\x8b\x08\x00"), FormatGzip},
		{[]byte("\x28\xb5\x2f\xfd\x04"), FormatZstd},
		{[]byte("\xfd7zXZ\x00\x00"), FormatXZ},
		{[]byte("BZh91AY&SY"), FormatBzip2},
		{[]byte("BZh9 not bzip"), FormatRaw},
		{[]byte("KDMV\x01"), FormatVMDK},
		{[]byte("# Disk DescriptorFile\n"), FormatVMDK},
		{[]byte("vhdxfile"), FormatVHDX},
		{[]byte("conectix"), FormatVPC},
		{vdi, FormatVDI},
		{[]byte("QED\x00"), FormatQED},
		{[]byte("QFI"), FormatRaw}, // too short to be qcow2
		{nil, FormatRaw},
		{make([]byte, 512), FormatRaw},
		{append(make([]byte, 510), 0x55, 0xaa), FormatRaw}, // MBR
	} {
		if got := Detect(tc.in); got != tc.want {
			t.Errorf("Detect(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestParseChecksum(t *testing.T) {
	sha256 := strings.Repeat("a", 64)
	for _, tc := range []struct {
		algo, value string
		md5         bool
		want        Checksum
		err         string
	}{
		{"", sha256, false, Checksum{Algo: "sha256", Value: sha256}, ""},
		{"", strings.ToUpper(sha256), false, Checksum{Algo: "sha256", Value: sha256}, ""},
		{"SHA512", strings.Repeat("b", 128), false, Checksum{Algo: "sha512", Value: strings.Repeat("b", 128)}, ""},
		{"", strings.Repeat("c", 32), true, Checksum{Algo: "md5", Value: strings.Repeat("c", 32)}, ""},
		{"", strings.Repeat("c", 32), false, Checksum{}, "md5 is not allowed"},
		{"md5", strings.Repeat("c", 32), false, Checksum{}, "md5 is not allowed"},
		{"sha256", strings.Repeat("b", 128), false, Checksum{}, "has 64 hex digits"},
		{"sha1", strings.Repeat("d", 40), false, Checksum{}, ""},
		{"", strings.Repeat("d", 40), false, Checksum{}, "match no algorithm"},
		{"", "xyz", false, Checksum{}, "not hex"},
		{"", "", false, Checksum{}, "no checksum"},
		{"", "https://example.com/SHA256SUMS", false, Checksum{URL: "https://example.com/SHA256SUMS"}, ""},
		{"sha512", "http://example.com/SUMS", false, Checksum{Algo: "sha512", URL: "http://example.com/SUMS"}, ""},
	} {
		got, err := ParseChecksum(tc.algo, tc.value, tc.md5)
		if tc.err != "" || tc.want == (Checksum{}) {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseChecksum(%q, %q): %v, want error %q", tc.algo, tc.value, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseChecksum(%q, %q) = %+v, %v; want %+v", tc.algo, tc.value, got, err, tc.want)
		}
	}
}

func TestPickChecksum(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, tc := range []struct {
		file, name, want string
	}{
		{a + "  other.img\n" + b + "  disk.img\n", "disk.img", b},
		{a + " *disk.img\n", "disk.img", a},
		{"# comment\nSHA256 (other.img) = " + a + "\nSHA256 (disk.img) = " + b + "\n", "disk.img", b},
		{a + "\n", "disk.img", a},                    // only one: take it
		{a + "  other.img\n", "disk.img", a},         // only one: take it, as IPA does
		{a + "  x/disk.img\n", "disk.img", a},        // path in the file
		{a + "  one\n" + b + "  two\n", "three", ""}, // ambiguous
		{"", "disk.img", ""},
	} {
		got, err := pickChecksum(strings.NewReader(tc.file), tc.name)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("pickChecksum(%q, %q) = %q, %v; want %q", tc.file, tc.name, got, err, tc.want)
		}
	}
}

// TestValidateQCOW2Header patches single header fields of a valid image.
func TestValidateQCOW2Header(t *testing.T) {
	needTool(t, "qemu-img")
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 4*mib, 2*mib)
	img := filepath.Join(dir, "disk.qcow2")
	qemuImg(t, "convert", "-O", "qcow2", raw, img)
	good, _ := os.ReadFile(img)
	if _, err := validateQCOW2(bytes.NewReader(good), int64(len(good))); err != nil {
		t.Fatalf("valid image refused: %v", err)
	}
	put32 := func(off int, v uint32) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint32(b[off:], v) } }
	put64 := func(off int, v uint64) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint64(b[off:], v) } }
	for _, tc := range []struct {
		name  string
		patch func([]byte)
		want  string
	}{
		{"version 1", put32(4, 1), "version"},
		{"backing", put64(8, 512), "backing file"},
		{"cluster bits 30", put32(20, 30), "cluster_bits"},
		{"size 0", put64(24, 0), "virtual size"},
		{"size past L1", put64(24, 1<<40), "cannot map"},
		{"crypt aes", put32(32, 1), "encrypted"},
		{"L1 unaligned", put64(40, 65536+8), "aligned"},
		{"corrupt", put64(72, qcowCorrupt), "corrupt"},
		{"data file", put64(72, qcowDataFile), "external data file"},
		{"unknown feature", put64(72, 1<<20), "unknown incompatible"},
		{"header length", put32(100, 7), "header_length"},
		{"zstd without bit", func(b []byte) { binary.BigEndian.PutUint32(b[100:], 112); b[104] = 1 }, "disagree"},
	} {
		b := bytes.Clone(good)
		tc.patch(b)
		_, err := validateQCOW2(bytes.NewReader(b), int64(len(b)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want error with %q", tc.name, err, tc.want)
		}
	}
}
