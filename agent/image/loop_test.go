package image

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// loopDevice attaches a size-byte file as a loop device and returns its path.
func loopDevice(t testing.TB, size int64) string {
	t.Helper()
	needTool(t, "losetup")
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	backing := filepath.Join(t.TempDir(), "loop.img")
	makeTarget(t, backing, size)
	out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup --find --show: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// TestLoopDevice writes a qcow2 and a zstd raw image onto a real block
// device: O_DIRECT writes and BLKZEROOUT, then a checksum mismatch that must
// zero the device's first and last MiB.
func TestLoopDevice(t *testing.T) {
	needTool(t, "qemu-img")
	dev := loopDevice(t, 40*mib)
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 32*mib, 28*mib)
	qemuImg(t, "convert", "-c", "-O", "qcow2", raw, filepath.Join(dir, "disk.qcow2"))
	srv := newImageServer(t, dir)

	sink, err := OpenSink(dev)
	if err != nil {
		t.Fatal(err)
	}
	if !sink.block || sink.direct == nil || sink.Size() != 40*mib {
		t.Fatalf("sink on %s: block %v, O_DIRECT %v, size %d", dev, sink.block, sink.direct != nil, sink.Size())
	}
	sink.Close()

	req := writeReq(t, srv.url("disk.qcow2"), "sha256", sumFile(t, "sha256", filepath.Join(dir, "disk.qcow2")), dev)
	res, err := Write(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fileSHA(t, dev, 32*mib), fileSHA(t, raw, 32*mib); got != want {
		t.Errorf("device sha256 %s, want %s", got, want)
	}
	if res.Zeroed == 0 || res.Written == 0 {
		t.Errorf("result %+v: expected both written and zeroed bytes", res)
	}

	req = writeReq(t, srv.url("disk.raw"), "sha256", strings.Repeat("0", 64), dev)
	if _, err := Write(context.Background(), req); err == nil || !strings.Contains(err.Error(), "mismatch") {
		t.Fatalf("mismatch not reported: %v", err)
	}
	for _, off := range []int64{0, 39 * mib} {
		if !isZero(readAt(t, dev, off, mib)) {
			t.Errorf("device MiB at %d not zeroed after a mismatch", off)
		}
	}
}
