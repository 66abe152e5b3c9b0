//go:build !linux

package coreos

import (
	"context"
	"errors"

	"github.com/kilnhq/kiln/agent/disk"
)

// BootLabel is the filesystem label (and GPT name) of CoreOS's /boot.
const BootLabel = "boot"

var errNotLinux = errors.New("installing CoreOS natively needs Linux")

// FindBootPartition is only implemented on Linux.
func FindBootPartition(string) (disk.Partition, error) { return disk.Partition{}, errNotLinux }

func withBootMounted(context.Context, string, func(string) error) error { return errNotLinux }

func ensureExclusive(string) error { return errNotLinux }
