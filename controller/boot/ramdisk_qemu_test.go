package boot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/klauspost/compress/zstd"
	"github.com/u-root/u-root/pkg/cpio"
)

// The build (the kernel from the cache, the init) and the boot have their
// own time limits, so that a slow build on a loaded machine cannot use up the
// boot's, and a failure says which ran out. Safety nets for a loaded 2-core
// machine, not measurements: the boot takes seconds on a quiet one.
const (
	qemuBuildTimeout = 15 * time.Minute
	qemuBootTimeout  = 10 * time.Minute
)

var (
	errQEMUBuildTimeout = fmt.Errorf("the build timeout (%v) ran out", qemuBuildTimeout)
	errQEMUBootTimeout  = fmt.Errorf("the boot timeout (%v) ran out: qemu did not power off", qemuBootTimeout)
)

// TestRamdiskBootsWithNetworkData boots Debian's kernel in QEMU (TCG) on a
// zstd-compressed initramfs as served by the ramdisk handler for a node with
// network data: the init (internal/netdatainit) must find both the base
// archive's files and /etc/kiln/network.yaml from the appended one.
func TestRamdiskBootsWithNetworkData(t *testing.T) {
	for _, tool := range []string{"qemu-system-x86_64", "apt-get", "dpkg-deb"} {
		testtool.Need(t, tool)
	}
	ctx, cancel := context.WithTimeoutCause(t.Context(), qemuBuildTimeout, errQEMUBuildTimeout)
	defer cancel()
	dir := t.TempDir()
	kdir := filepath.Join(dir, "kernel")
	// The pinned Debian kernel, as the initramfs build uses (cached by apt).
	cmd := testtool.Command(ctx, "scripts/fetch-kernel.sh", kdir)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "MODULES_LIST=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			t.Fatalf("fetch-kernel.sh: %v\n%s", cause, out)
		}
		testtool.SkipUnavailable(t, "fetch-kernel.sh", err, out)
		t.Fatalf("fetch-kernel.sh: %v\n%s", err, out)
	}

	initBin := filepath.Join(dir, "init")
	build := testtool.Command(ctx, "go", "build", "-o", initBin, "./internal/netdatainit")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		t.Fatalf("build init: %v\n%s", err, out)
	}
	cancel()
	initB, err := os.ReadFile(initBin)
	if err != nil {
		t.Fatal(err)
	}
	var base bytes.Buffer
	zw, _ := zstd.NewWriter(&base, zstd.WithEncoderLevel(zstd.SpeedFastest))
	cw := cpio.Newc.Writer(zw)
	for _, r := range []cpio.Record{
		cpio.StaticRecord(initB, cpio.Info{Name: "init", Mode: cpio.S_IFREG | 0o755}),
		cpio.StaticFile("init-marker", "x", 0o644),
	} {
		if err := cw.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := cpio.WriteTrailer(cw); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	rd := filepath.Join(dir, "kiln-agent.initramfs")
	os.WriteFile(rd, base.Bytes(), 0o644)

	doc := []byte(nmstateDoc)
	srv := httptest.NewServer(NewRamdiskHandler(RamdiskConfig{Ramdisk: rd}, &mapNetworkData{data: map[string][]byte{"n1": doc}}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/n1")
	if err != nil {
		t.Fatal(err)
	}
	served := body(t, resp)
	initrd := filepath.Join(dir, "served.initramfs")
	os.WriteFile(initrd, served, 0o644)

	ctx, cancel = context.WithTimeoutCause(t.Context(), qemuBootTimeout, errQEMUBootTimeout)
	defer cancel()
	// no_timer_check: under TCG on a loaded host the kernel's timer check
	// can miss the interrupt and panic (initramfs's boot test explains).
	q := testtool.Command(ctx, "qemu-system-x86_64", "-accel", "tcg", "-m", "512", "-smp", "1",
		"-kernel", filepath.Join(kdir, "vmlinuz"), "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 no_timer_check quiet", "-nographic", "-no-reboot", "-nic", "none")
	out, err := q.CombinedOutput()
	if cause := context.Cause(ctx); cause != nil {
		t.Fatalf("qemu: %v\n%s", cause, out)
	}
	want := fmt.Sprintf("KILN-NETDATA-OK sha256=%x mode=600", sha256.Sum256(doc))
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "KILN-BASE-OK") {
		t.Fatalf("console lacks %q and KILN-BASE-OK (qemu: %v):\n%s", want, err, out)
	}
}
