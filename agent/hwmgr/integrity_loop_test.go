package hwmgr

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// TestWriteImageFillsDiskExactly writes a GPT image exactly the size of the
// device: the backup GPT is already at the device's last LBA, so nothing is
// rewritten and the device is the image byte for byte (IPA runs sgdisk -e
// only when the disk is larger than the image).
func TestWriteImageFillsDiskExactly(t *testing.T) {
	need(t, "sgdisk")
	img := diskImage(t)
	st, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, map[string]string{"image.raw": img})
	dev := loopDevice(t, st.Size())
	m := New(Options{ImageRetries: -1})
	res, err := m.WriteImage(context.Background(), writeReq(base+"/image.raw", sha256File(t, img, 0), dev, nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.PartitionUUIDs.RootUUID == "" {
		t.Fatalf("result %+v", res)
	}
	if got, want := sha256File(t, dev, 0), sha256File(t, img, 0); got != want {
		t.Fatalf("device sha256 %s, image's %s", got, want)
	}
	if got, want := hashRange(t, dev, st.Size()-4096, 4096), hashRange(t, img, st.Size()-4096, 4096); got != want {
		t.Fatalf("the last 8 sectors (backup GPT header) changed")
	}
	out := run(t, "sgdisk", "-v", dev)
	if !strings.Contains(out, "No problems found") {
		t.Fatalf("sgdisk -v %s:\n%s", dev, out)
	}
}

// TestWriteImageTruncatedGzip serves the first part of a gzipped image with
// the checksum of exactly that part: the deploy fails saying the stream was
// cut short, and the device's first MiB is zeroed.
func TestWriteImageTruncatedGzip(t *testing.T) {
	need(t)
	img := diskImage(t)
	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	gzPath := filepath.Join(t.TempDir(), "image.raw.gz")
	f, err := os.Create(gzPath)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Write(raw)
	zw.Close()
	st, _ := f.Stat()
	if err := f.Truncate(st.Size() - 6); err != nil { // the CRC and half the size
		t.Fatal(err)
	}
	f.Close()
	dev := loopDevice(t, 64<<20)
	if err := os.WriteFile(dev, []byte(strings.Repeat("\xab", 1<<20)), 0); err != nil {
		t.Fatal(err)
	}
	base := serve(t, map[string]string{"image.raw.gz": gzPath})
	m := New(Options{ImageRetries: -1})
	_, err = m.WriteImage(context.Background(), writeReq(base+"/image.raw.gz", sha256File(t, gzPath, 0), dev, nil))
	if err == nil || !strings.Contains(err.Error(), "gzip stream cut short") || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("err = %v, want the gzip stream cut short", err)
	}
	if got, want := sha256File(t, dev, 1<<20), sha256File(t, "/dev/zero", 1<<20); got != want {
		t.Fatalf("first MiB not zeroed")
	}
}
