package erase

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/kilnhq/kiln/agent/disk"
)

// The ioctl structures must match the kernel's layout byte for byte.
func TestIoctlStructSizes(t *testing.T) {
	if unsafe.Sizeof(nvmePassthru{}) != 72 {
		t.Errorf("struct nvme_passthru_cmd is 72 bytes, ours %d", unsafe.Sizeof(nvmePassthru{}))
	}
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		if unsafe.Sizeof(sgIOHdr{}) != 88 || unsafe.Offsetof(sgIOHdr{}.UsrPtr) != 56 || unsafe.Offsetof(sgIOHdr{}.Status) != 64 {
			t.Errorf("struct sg_io_hdr is 88 bytes with usr_ptr at 56, status at 64; ours %d, %d, %d",
				unsafe.Sizeof(sgIOHdr{}), unsafe.Offsetof(sgIOHdr{}.UsrPtr), unsafe.Offsetof(sgIOHdr{}.Status))
		}
	}
}

// An image file (no ioctls, maybe no O_DIRECT) is erased by writing
// zeroes, and verified like a disk.
func TestFullEraseOnImageFile(t *testing.T) {
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, bytes.Repeat([]byte("used disk "), 400_000), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEraser(img)
	res, err := e.Full(t.Context(), img)
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != ZeroOverwrite {
		t.Errorf("method %s", res.Method)
	}
	b, _ := os.ReadFile(img)
	if len(b) != 4_000_000 || firstNonZero(b) >= 0 {
		t.Errorf("file not zeroed (%d bytes, first non-zero %d)", len(b), firstNonZero(b))
	}
	d, err := Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.NVMe() != nil || d.ATA() != nil || d.CanDiscard() || d.KernelPartitions() != nil {
		t.Error("an image file claims device capabilities")
	}
	if err := d.Discard(t.Context(), 0, 4096); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("discard on a file: %v", err)
	}
	if _, err := (&Eraser{Guard: disk.Guard{}}).Full(t.Context(), img); err == nil {
		t.Error("zero Guard allowed an erase")
	}
}
