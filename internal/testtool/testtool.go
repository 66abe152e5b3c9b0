// Package testtool is what tests call before they run a system tool: it
// skips the test, naming the missing tool and the Debian package that has
// it, or makes sure the code under test finds the tool by name.
package testtool

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/internal/syspath"
)

// debianPackage names the package that installs each tool the tests use
// (scripts/install-deps.sh installs them all).
var debianPackage = map[string]string{
	"apt-get": "apt", "dpkg-deb": "dpkg",
	"depmod": "kmod", "modprobe": "kmod",
	"losetup": "mount", "wipefs": "util-linux", "blkid": "util-linux",
	"sfdisk": "fdisk", "sgdisk": "gdisk",
	"mkfs.vfat": "dosfstools", "mkfs.fat": "dosfstools", "fsck.fat": "dosfstools", "fsck.vfat": "dosfstools",
	"mkfs.ext4": "e2fsprogs", "debugfs": "e2fsprogs", "chattr": "e2fsprogs",
	"mkfs.xfs": "xfsprogs", "mkfs.btrfs": "btrfs-progs",
	"mdadm": "mdadm", "lvm": "lvm2", "udevadm": "udev",
	"qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils",
	"zstd": "zstd", "xz": "xz-utils", "cpio": "cpio",
	"xorriso": "xorriso", "isoinfo": "genisoimage",
	"mcopy": "mtools", "mmd": "mtools", "mdir": "mtools", "objcopy": "binutils",
	"syslinux": "syslinux", "ip": "iproute2",
}

// Need skips t unless every tool is found by syspath.LookPath (PATH, then
// /usr/sbin and /sbin), and then extends PATH with those directories so
// that the test and the code it tests can run the tools by name.
func Need(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := syspath.LookPath(tool); err != nil {
			t.Skip(Missing(tool, err))
		}
	}
	syspath.ExtendPATH()
}

// Missing is the skip message for a tool LookPath did not find.
func Missing(tool string, err error) string {
	msg := tool + " not installed (" + err.Error() + ")"
	if pkg, ok := debianPackage[tool]; ok {
		msg += "; Debian package " + pkg + ", installed by scripts/install-deps.sh"
	}
	return msg
}

// ExitUnavailable is the exit status with which scripts/fetch-kernel.sh says
// a package could not be downloaded (offline, or apt's lists not updated):
// a missing prerequisite of the test, not a failure of the code under test.
// It is sysexits.h's EX_TEMPFAIL.
const ExitUnavailable = 75

// SkipUnavailable skips t when err is name's exit with ExitUnavailable,
// quoting the last line of its output; otherwise it returns.
func SkipUnavailable(t testing.TB, name string, err error, out []byte) {
	t.Helper()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == ExitUnavailable {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Skipf("%s could not download what it needs (offline?): %s", name, lines[len(lines)-1])
	}
}
