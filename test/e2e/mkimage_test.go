package e2e

// This file has no build tag: `make test` runs it. The rest of the package
// is the QEMU end-to-end suite (`make e2e`, build tag e2e).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/internal/testtool"
)

// TestMkimageCache: mkimage.sh builds an image once per set of inputs.
// Two builds started together into an empty cache leave one complete entry
// and no temporaries, and both hand out that entry's images; a third build,
// from a copy of the kernel directory, is served from the cache; a changed
// kernel is a new entry. The kernel
// and modules are stand-in bytes: mkimage.sh copies them, never runs them.
func TestMkimageCache(t *testing.T) {
	testtool.Need(t, "go", "cpio", "gzip", "objcopy", "mkfs.vfat", "mmd", "mcopy", "syslinux", "sgdisk", "mkfs.ext4", "qemu-img", "zstd")
	for _, f := range []string{"/usr/lib/systemd/boot/efi/linuxx64.efi.stub", "/usr/lib/syslinux/mbr/gptmbr.bin"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%s missing (Debian systemd-boot-efi, syslinux-common; scripts/install-deps.sh installs them)", f)
		}
	}
	kdir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(kdir, "modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(kdir, "vmlinuz"), "stand-in kernel 1")
	for _, m := range []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "virtio_blk"} {
		write(t, filepath.Join(kdir, "modules", m+".ko"), "stand-in "+m)
	}
	cache := t.TempDir()
	entries := func() []string {
		des, err := os.ReadDir(filepath.Join(cache, "e2e-images"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		return names
	}

	outs := []string{t.TempDir(), t.TempDir()}
	logs := make([]string, len(outs))
	var wg sync.WaitGroup
	for i, out := range outs {
		wg.Go(func() { logs[i] = mkimage(t, kdir, out, cache) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	first := entries()
	if len(first) != 1 {
		t.Fatalf("cache after two concurrent builds holds %q, want one entry and no temporaries", first)
	}
	want := checkImages(t, outs[0])
	if got := checkImages(t, outs[1]); got != want {
		t.Errorf("the two concurrent builds handed out different images: %s and %s", want, got)
	}

	// The same kernel files in another directory: the same entry.
	kdir2 := t.TempDir()
	if err := os.CopyFS(kdir2, os.DirFS(kdir)); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if log := mkimage(t, kdir2, out, cache); !strings.Contains(log, "(cached: ") {
		t.Errorf("third build (the kernel copied to another directory) was not served from the cache:\n%s", log)
	}
	if got := checkImages(t, out); got != want {
		t.Errorf("the cached build's qcow2 is %s, want the stored %s", got, want)
	}

	write(t, filepath.Join(kdir, "vmlinuz"), "stand-in kernel 2")
	if log := mkimage(t, kdir, t.TempDir(), cache); strings.Contains(log, "(cached: ") {
		t.Errorf("a changed kernel was served from the cache:\n%s", log)
	}
	if got := entries(); len(got) != 2 {
		t.Errorf("cache after a changed kernel holds %q, want two entries", got)
	}
}

// mkimage runs test/e2e/mkimage.sh KDIR OUT good with cache as KILN_CACHE
// and returns its output.
func mkimage(t *testing.T, kdir, out, cache string) string {
	ctx, cancel := testtool.WithTimeout(t.Context(), "build", testtool.BuildTimeout)
	defer cancel()
	cmd := testtool.Command(ctx, "./mkimage.sh", kdir, out, "good")
	cmd.Env = append(os.Environ(), "KILN_CACHE="+cache, "KILN_IMAGE_CACHE=1")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("mkimage.sh: %v\n%s", testtool.Why(ctx, err), b)
	}
	return string(b)
}

// checkImages checks that each image in dir has the SHA-256 its .sha256
// file names, and returns the qcow2's.
func checkImages(t *testing.T, dir string) string {
	t.Helper()
	var qcow2 string
	for _, f := range []string{"good.raw", "good.qcow2", "good.raw.zst"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		got := hex.EncodeToString(sum[:])
		want, err := os.ReadFile(filepath.Join(dir, f+".sha256"))
		if err != nil {
			t.Fatal(err)
		}
		if got != string(bytes.TrimSpace(want)) {
			t.Errorf("%s: SHA-256 %s, its .sha256 says %s", f, got, want)
		}
		if f == "good.qcow2" {
			qcow2 = got
		}
	}
	return qcow2
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
