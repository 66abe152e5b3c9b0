package syspath

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestWithSbin(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "/usr/sbin:/sbin"},
		{"/usr/bin:/bin", "/usr/bin:/bin:/usr/sbin:/sbin"},
		{"/usr/sbin:/usr/bin", "/usr/sbin:/usr/bin:/sbin"},
		{"/sbin/:/usr/sbin", "/sbin/:/usr/sbin"},
		{"/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	} {
		if got := withSbin(tc.in); got != tc.want {
			t.Errorf("withSbin(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLookPathSbin: a tool that is only in one of SbinDirs is found with a
// PATH that lacks them, as a normal user's does.
func TestLookPathSbin(t *testing.T) {
	dir := t.TempDir()
	sbin := filepath.Join(dir, "sbin")
	if err := os.Mkdir(sbin, 0o755); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(sbin, "kiln-test-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := SbinDirs
	SbinDirs = []string{filepath.Join(dir, "none"), sbin}
	t.Cleanup(func() { SbinDirs = old })
	t.Setenv("PATH", filepath.Join(dir, "bin"))

	if _, err := exec.LookPath("kiln-test-tool"); err == nil {
		t.Fatal("exec.LookPath found the tool outside PATH; the test proves nothing")
	}
	got, err := LookPath("kiln-test-tool")
	if err != nil || got != tool {
		t.Fatalf("LookPath = %q, %v; want %q", got, err, tool)
	}

	_, err = LookPath("kiln-test-absent")
	if !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("absent tool: err %v, want exec.ErrNotFound", err)
	}
	if want := "kiln-test-absent: not found in PATH, " + filepath.Join(dir, "none") + ", " + sbin + ": executable file not found in $PATH"; err.Error() != want {
		t.Errorf("absent tool: error %q, want %q", err, want)
	}
	if _, err := LookPath(filepath.Join(dir, "none", "kiln-test-tool")); err == nil {
		t.Error("a path with a slash was searched for instead of checked as given")
	}
}
