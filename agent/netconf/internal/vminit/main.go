// Command vminit is the /init of a throwaway QEMU VM that runs the netconf
// namespace tests under a stock distribution kernel, for hosts whose kernel
// lacks the bonding or 802.1Q drivers (the tests skip there). It mounts the
// pseudo filesystems, loads the modules listed in /modules/order, runs
// /netconf.test with the -test.run pattern given as kiln.run= on the kernel
// command line, prints "KILN-VM-RESULT: ok|<error>" and powers off.
// testdata/vmtest.sh builds the initramfs and boots it.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	err := run()
	if err == nil {
		fmt.Println("KILN-VM-RESULT: ok")
	} else {
		fmt.Println("KILN-VM-RESULT:", err)
	}
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func run() error {
	fmt.Println()
	os.Setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
	for _, m := range [][3]string{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/run", "tmpfs"}, {"tmpfs", "/tmp", "tmpfs"},
	} {
		if err := os.MkdirAll(m[1], 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m[0], m[1], m[2], 0, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m[1], err)
		}
	}
	_ = os.Symlink("/run", "/var/run")
	order, err := os.ReadFile("/modules/order")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(order)), "\n") {
		name, params, _ := strings.Cut(strings.TrimSpace(line), " ")
		f, err := os.Open("/modules/" + name)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), params, 0)
		f.Close()
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("load %s: %w", name, err)
		}
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("lo up: %v: %s", err, out)
	}
	pattern := "."
	cmdline, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "kiln.run="); ok {
			pattern = v
		}
	}
	cmd := exec.Command("/netconf.test", "-test.v", "-test.count=1", "-test.run", pattern)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "TMPDIR=/tmp"}
	return cmd.Run()
}
