// Package syspath finds system tools where Debian installs them. depmod,
// losetup, sgdisk, sfdisk, mkfs.* and friends live in /usr/sbin or /sbin,
// which are on root's PATH but not on a normal user's; looking only at PATH
// reports them "not installed" when they are there.
//
// It imports nothing of ours, so both the agent and the controller (and
// their tests) may use it.
package syspath

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SbinDirs are searched after PATH, in this order.
var SbinDirs = []string{"/usr/sbin", "/sbin"}

// LookPath is exec.LookPath with SbinDirs searched after PATH. A name with a
// slash is checked as given. The error names every place looked in.
func LookPath(file string) (string, error) {
	p, err := exec.LookPath(file)
	if err == nil || strings.Contains(file, "/") {
		return p, err
	}
	for _, d := range SbinDirs {
		if p, serr := exec.LookPath(filepath.Join(d, file)); serr == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH, %s: %w", file, strings.Join(SbinDirs, ", "), exec.ErrNotFound)
}

// ExtendPATH appends to this process's PATH the SbinDirs it lacks, so that
// commands run by bare name (by code that calls exec.Command("sgdisk", …))
// find what LookPath found. It is idempotent and only ever appends, so a
// tool earlier on PATH still wins.
func ExtendPATH() {
	if old := os.Getenv("PATH"); withSbin(old) != old {
		os.Setenv("PATH", withSbin(old))
	}
}

// withSbin returns path with each of SbinDirs appended unless already there.
func withSbin(path string) string {
	have := map[string]bool{}
	for _, d := range filepath.SplitList(path) {
		have[filepath.Clean(d)] = true
	}
	for _, d := range SbinDirs {
		if have[d] {
			continue
		}
		if path == "" {
			path = d
		} else {
			path += string(os.PathListSeparator) + d
		}
	}
	return path
}
