//go:build linux

// Command vmtest is the init of the throwaway VM scripts/vmtest.sh boots:
// it mounts the kernel file systems, loads the modules shipped in the
// initramfs, runs the Go test binary /vmtest.test as root with the
// arguments given by vmtest.run= on the kernel command line, prints
// "VMTEST EXIT <status>" on the console and powers the VM off. It lets
// tests that need kernel features the build host lacks (md software RAID)
// run on the agent's own kernel.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kilnhq/kiln/initramfs/modload"
)

func main() {
	status := run()
	fmt.Printf("VMTEST EXIT %d\n", status)
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	for {
		time.Sleep(time.Hour) // PID 1 must not exit
	}
}

func run() int {
	for _, m := range []struct{ src, dir, fs string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/tmp", "tmpfs"}, {"tmpfs", "/run", "tmpfs"},
	} {
		_ = os.MkdirAll(m.dir, 0o755)
		if err := unix.Mount(m.src, m.dir, m.fs, 0, ""); err != nil {
			fmt.Println("vmtest: mount", m.dir, err)
			return 2
		}
	}
	// Tests serve over loopback (httptest): bring lo up.
	if lo, err := netlink.LinkByName("lo"); err == nil {
		if err := netlink.LinkSetUp(lo); err != nil {
			fmt.Println("vmtest: lo up:", err)
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := modload.Load(context.Background(), log, modload.Dir, nil); err != nil {
		fmt.Println("vmtest: some modules did not load:", err)
	}
	// md resyncs new RAID-1 arrays in the background; the test disks live
	// in RAM, so keep resync from filling them.
	for _, f := range []string{"/proc/sys/dev/raid/speed_limit_min", "/proc/sys/dev/raid/speed_limit_max"} {
		_ = os.WriteFile(f, []byte("1\n"), 0o644)
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	args := []string{"-test.v", "-test.count=1"}
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "vmtest.run="); ok {
			args = append(args, "-test.run="+v)
		}
	}
	cmd := exec.Command("/vmtest.test", args...)
	cmd.Dir = "/tmp"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "TMPDIR=/tmp"}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Println("vmtest:", err)
		return 2
	}
	return 0
}
