package testtool

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMissingNamesThePackage(t *testing.T) {
	err := errors.New("sgdisk: not found in PATH, /usr/sbin, /sbin")
	got := Missing("sgdisk", err)
	for _, want := range []string{"sgdisk not installed", "/usr/sbin", "Debian package gdisk", "scripts/install-deps.sh"} {
		if !strings.Contains(got, want) {
			t.Errorf("Missing = %q, want it to contain %q", got, want)
		}
	}
	if got := Missing("kiln-no-such-tool", err); strings.Contains(got, "Debian package") {
		t.Errorf("Missing for an unknown tool names a package: %q", got)
	}
}

// TestNeedSkips runs Need for an absent tool in a subtest, which must end
// skipped, not failed, and not run on.
func TestNeedSkips(t *testing.T) {
	ran := false
	ok := t.Run("absent", func(t *testing.T) {
		Need(t, "kiln-no-such-tool")
		ran = true
	})
	if !ok || ran {
		t.Fatalf("subtest ok=%v ran past Need=%v; want a skip", ok, ran)
	}
}

// TestNeedExtendsPATH: after Need, a tool from /usr/sbin runs by bare name
// even when PATH started without the sbin directories.
func TestNeedExtendsPATH(t *testing.T) {
	if _, err := os.Stat("/usr/sbin/losetup"); err != nil {
		if _, err := os.Stat("/sbin/losetup"); err != nil {
			t.Skip("losetup not in /usr/sbin or /sbin here (Debian package mount)")
		}
	}
	t.Setenv("PATH", "/usr/bin:/bin")
	Need(t, "losetup")
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Fatalf("after Need, exec.LookPath(losetup): %v (PATH=%s)", err, os.Getenv("PATH"))
	}
}

// TestSkipUnavailable: exit status 75 skips, any other failure returns so
// that the caller fails the test.
func TestSkipUnavailable(t *testing.T) {
	for _, tc := range []struct {
		script string
		skip   bool
	}{
		{"echo downloading; echo 'fetch-kernel: apt-get download x failed' >&2; exit 75", true},
		{"echo broken >&2; exit 1", false},
	} {
		out, err := exec.Command("/bin/sh", "-c", tc.script).CombinedOutput()
		if err == nil {
			t.Fatalf("%q succeeded", tc.script)
		}
		returned := false
		ok := t.Run("", func(t *testing.T) {
			SkipUnavailable(t, "fetch-kernel.sh", err, out)
			returned = true
		})
		if !ok || returned == tc.skip {
			t.Errorf("%q: subtest ok=%v, returned=%v; want skip=%v", tc.script, ok, returned, tc.skip)
		}
	}
}
