package image

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lima-vm/go-qcow2reader/image/qcow2"
)

func FuzzDetect(f *testing.F) {
	for _, s := range []string{"QFI\xfb", "\x1f\x8b", "\x28\xb5\x2f\xfd", "\xfd7zXZ\x00", "BZh91AY&SY", "KDMV", "vhdxfile", "conectix", "QED\x00", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := Detect(b)
		// Detection only looks at the first DetectLen bytes.
		if len(b) > DetectLen && Detect(b[:DetectLen]) != got {
			t.Errorf("Detect depends on bytes past DetectLen")
		}
		// Appending must not change a non-raw verdict: a longer read is the
		// same image.
		if got != FormatRaw && Detect(append(bytes.Clone(b), make([]byte, 64)...)) != got {
			t.Errorf("Detect changed with more bytes")
		}
	})
}

func FuzzParseChecksum(f *testing.F) {
	f.Add("", strings.Repeat("a", 64), false)
	f.Add("sha512", strings.Repeat("B", 128), true)
	f.Add("md5", strings.Repeat("c", 32), true)
	f.Add("", "https://x/SUMS", false)
	f.Fuzz(func(t *testing.T, algo, value string, md5 bool) {
		c, err := ParseChecksum(algo, value, md5)
		if err != nil {
			return
		}
		if c.URL == "" && (newHash(c.Algo) == nil || len(c.Value) != 2*newHash(c.Algo).Size()) {
			t.Errorf("accepted unusable checksum %+v", c)
		}
		if c.Algo == "md5" && !md5 {
			t.Errorf("accepted md5 when not allowed")
		}
	})
}

// FuzzValidateQCOW2 mutates real qcow2 images: whatever validateQCOW2 accepts,
// go-qcow2reader must be able to map and read without panicking or reading
// outside the file. Run it with a short minimization budget, or the fuzzer
// spends its time shrinking each new input (up to 60 s apiece):
//
//	go test -run '^$' -fuzz FuzzValidateQCOW2 -fuzzminimizetime 200x ./agent/image/
func FuzzValidateQCOW2(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.qcow2")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("QFI\xfb\x00\x00\x00\x03"))
	f.Fuzz(fuzzBody)
}

func fuzzBody(t *testing.T, b []byte) {
	{
		info, err := validateQCOW2(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		// go-qcow2reader re-reads a whole extended L2 table for every
		// cluster it maps: with large clusters one run would take seconds.
		if info.ExtendedL2 && info.ClusterBits > 14 {
			return
		}
		size := min(info.Size, 2<<20) // enough to cross many clusters
		ra := &boundedReader{t: t, b: b}
		img, err := qcow2.Open(ra, nil)
		if err != nil {
			return
		}
		if img.Readable() != nil {
			return
		}
		buf := make([]byte, 64<<10)
		for off := int64(0); off < size; off += int64(len(buf)) {
			n := min(int64(len(buf)), size-off)
			if _, err := img.Extent(off, n); err != nil {
				return
			}
			if _, err := readFullAt(img, buf[:n], off); err != nil {
				return
			}
		}
	}
}

// boundedReader fails the test on reads that start past the end: validated
// metadata must never point there.
type boundedReader struct {
	t *testing.T
	b []byte
}

func (r *boundedReader) ReadAt(p []byte, off int64) (int, error) {
	if off > int64(len(r.b)) {
		r.t.Errorf("read at %d past the end of the %d-byte image", off, len(r.b))
		return 0, io.EOF
	}
	return bytes.NewReader(r.b).ReadAt(p, off)
}
