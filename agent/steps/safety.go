package steps

import (
	"fmt"
	"path/filepath"
)

// Safety guards destructive steps. Inside the ramdisk every device is fair game
// (the machine is being provisioned); outside it — a developer running the agent
// on a workstation — only devices named in the allowlist may be written.
type Safety struct {
	// InRamdisk is true when the agent runs as the initramfs payload.
	InRamdisk bool
	// Allow lists device paths (e.g. /dev/loop3) destructive steps may touch
	// outside the ramdisk.
	Allow []string
}

// Check returns nil when dev may be written or erased, else an error saying why not.
func (s Safety) Check(dev string) error {
	if s.InRamdisk {
		return nil
	}
	clean := filepath.Clean(dev)
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		real = clean
	}
	for _, a := range s.Allow {
		ac := filepath.Clean(a)
		if ac == clean || ac == real {
			return nil
		}
		if ar, err := filepath.EvalSymlinks(ac); err == nil && ar == real {
			return nil
		}
	}
	return fmt.Errorf("refusing to touch %s: the agent is not running in a ramdisk and the device is not in --allow-device %v", dev, s.Allow)
}
