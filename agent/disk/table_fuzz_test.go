package disk

import (
	"bytes"
	"os"
	"testing"
)

// FuzzReadTableFrom feeds arbitrary disk heads to the partition table
// reader: images are untrusted, so no input may panic or make it allocate
// without bound, and what it returns must lie inside the disk.
func FuzzReadTableFrom(f *testing.F) {
	for _, name := range []string{"testdata/gpt-head.bin", "testdata/mbr-head.bin"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add(make([]byte, 1024))
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, err := ReadTableFrom(bytes.NewReader(b), int64(len(b)), 512)
		if err != nil {
			return
		}
		for _, p := range tb.Partitions {
			if p.Number < 1 || p.Size <= 0 && tb.Type == "gpt" {
				t.Fatalf("bad partition %+v", p)
			}
		}
	})
}
