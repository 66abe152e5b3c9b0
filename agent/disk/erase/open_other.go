//go:build !linux

package erase

import (
	"fmt"
	"runtime"
)

// Open is only implemented on Linux, where the agent runs.
func Open(path string) (Disk, error) {
	return nil, fmt.Errorf("open %s: erasing disks is not supported on %s", path, runtime.GOOS)
}
