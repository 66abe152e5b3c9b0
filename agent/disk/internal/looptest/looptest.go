// Package looptest gives the disk packages' tests real block devices: loop
// devices over sparse files, and the Debian tools (sgdisk, blkid, wipefs,
// mkfs.*) used as oracles.
package looptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/internal/syspath"
	"github.com/kilnhq/kiln/internal/testtool"
)

// Need skips the test when a tool is truly absent, naming it.
func Need(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		testtool.Need(t, tool)
	}
}

// Image creates a sparse file of size bytes in the test's temp dir.
func Image(t testing.TB, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// Attach puts img on a loop device with partition scanning (and any extra
// losetup options) and returns its path; the device is detached when the test ends. Tests skip only when
// loop devices cannot exist here (not root, no loop driver).
func Attach(t testing.TB, img string, opts ...string) string {
	t.Helper()
	return attach(t, img, append([]string{"--partscan"}, opts...)...)
}

// AttachRange puts size bytes of img from off on a loop device of their
// own (no partition scan): how a test looks at what a partition held after
// its table is gone.
func AttachRange(t testing.TB, img string, off, size int64) string {
	t.Helper()
	return attach(t, img, "--offset", strconv.FormatInt(off, 10), "--sizelimit", strconv.FormatInt(size, 10))
}

func attach(t testing.TB, img string, opts ...string) string {
	t.Helper()
	Need(t, "losetup")
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	out, err := exec.Command("losetup", append(append([]string{"--find", "--show"}, opts...), img)...).CombinedOutput()
	if err != nil {
		if _, serr := os.Stat("/dev/loop-control"); serr != nil {
			t.Skipf("no loop device support: %v", serr)
		}
		t.Fatalf("losetup %s: %v: %s", img, err, out)
	}
	dev := strings.TrimSpace(string(out))
	// Some kernels (this CI's among them) scan no partition tables at
	// all: add what the table says, as partx does.
	exec.Command("partx", "-a", dev).Run()
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// Run runs a command that must succeed and returns its combined output.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Output runs a command and returns its output whatever its exit status
// (blkid and wipefs exit non-zero when they find nothing).
func Output(name string, args ...string) string {
	out, _ := exec.Command(name, args...).CombinedOutput()
	return string(out)
}

// Settle waits for udev to create partition nodes, when udev runs.
func Settle() {
	if _, err := syspath.LookPath("udevadm"); err == nil {
		exec.Command("udevadm", "settle", "--timeout=5").Run()
	}
}
