//go:build !linux

package disk

import (
	"context"
	"fmt"
	"os"
	"runtime"
)

// The agent runs on Linux only; these keep the package building elsewhere
// (so the whole module vets on a developer's laptop).

func sectorSize(f *os.File) int { return 512 }

func isBlockDevice(f *os.File) bool { return false }

func rereadFile(ctx context.Context, f *os.File) error { return nil }

// RereadPartitions is only implemented on Linux.
func RereadPartitions(ctx context.Context, dev string) error {
	return fmt.Errorf("re-read partitions of %s: not supported on %s", dev, runtime.GOOS)
}

// KernelPartitions is only implemented on Linux.
func KernelPartitions(dev string) ([]Partition, error) {
	return nil, fmt.Errorf("kernel partitions of %s: not supported on %s", dev, runtime.GOOS)
}
