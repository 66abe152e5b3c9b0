package disk

import (
	"fmt"
	"path/filepath"
	"slices"
)

// Guard decides whether a destructive call may touch a device. Inside the
// agent ramdisk every local disk is fair game (the controller asked for the
// operation); anywhere else — a developer's laptop, a CI runner — only the
// devices the caller listed in Allow may be written, so a wrong path can
// never reach a real disk.
type Guard struct {
	// Allow lists device paths ("/dev/loop3") that may be modified when
	// InRamdisk is false. Symlinks are resolved on both sides.
	Allow []string
	// InRamdisk is true only when the caller knows it runs as the agent
	// inside its ramdisk.
	InRamdisk bool
}

// Check returns nil when dev may be modified, else an error naming the
// device and why it was refused.
func (g Guard) Check(dev string) error {
	if g.InRamdisk {
		return nil
	}
	want := canonical(dev)
	allowed := func(d string) bool {
		c := canonical(d)
		return slices.ContainsFunc(g.Allow, func(a string) bool { return canonical(a) == c })
	}
	if allowed(want) {
		return nil
	}
	// A software RAID device built only on allowed disks is allowed: it
	// writes nothing else.
	if disks := mdDisks(want); len(disks) > 0 && !slices.ContainsFunc(disks, func(d string) bool { return !allowed(d) }) {
		return nil
	}
	return fmt.Errorf("refusing to modify %s: not running in the agent ramdisk and the device is not allowed (kiln-agent --allow-device) %q", dev, g.Allow)
}

func canonical(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
