package agent

import (
	"bufio"
	"os"
	"strings"

	"github.com/kilnhq/kiln/agent/steps"
)

// DetectRamdisk reports whether the agent runs as the payload of an
// initramfs: PID 1 itself, or /init exists and / is rootfs, ramfs or tmpfs.
// Only then may destructive steps touch any device.
func DetectRamdisk() bool {
	if os.Getpid() == 1 {
		return true
	}
	_, err := os.Stat("/init")
	mounts, merr := os.ReadFile("/proc/self/mounts")
	if merr != nil {
		return false
	}
	return RamdiskRoot(string(mounts), err == nil)
}

// RamdiskRoot decides from /proc/self/mounts text: the last mount on / must be
// rootfs, ramfs or tmpfs, and /init must exist.
func RamdiskRoot(mounts string, initExists bool) bool {
	if !initExists {
		return false
	}
	fstype := ""
	sc := bufio.NewScanner(strings.NewReader(mounts))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[1] == "/" {
			fstype = f[2]
		}
	}
	switch fstype {
	case "rootfs", "ramfs", "tmpfs":
		return true
	}
	return false
}

// SafetyFor builds the Safety value steps receive from the --ramdisk setting
// (auto, true, false) and the --allow-device list.
func SafetyFor(cfg Config) steps.Safety {
	in := false
	switch cfg.Ramdisk {
	case "true":
		in = true
	case "false":
		in = false
	default:
		in = DetectRamdisk()
	}
	return steps.Safety{InRamdisk: in, Allow: append([]string(nil), cfg.AllowDevices...)}
}
