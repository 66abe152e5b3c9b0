//go:build linux

// Command netdatainit is the init of controller/boot's QEMU test: it checks
// that the kernel unpacked the network-data archive appended to the ramdisk
// by printing the file's SHA-256 on the console, then powers off.
package main

import (
	"crypto/sha256"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func main() {
	_ = os.MkdirAll("/dev", 0o755)
	_ = unix.Mount("devtmpfs", "/dev", "devtmpfs", 0, "")
	out, err := os.OpenFile("/dev/console", os.O_WRONLY, 0)
	if err != nil {
		out = os.Stdout
	}
	if b, err := os.ReadFile("/etc/kiln/network.yaml"); err != nil {
		fmt.Fprintf(out, "KILN-NETDATA-MISSING %v\n", err)
	} else {
		st, _ := os.Stat("/etc/kiln/network.yaml")
		fmt.Fprintf(out, "KILN-NETDATA-OK sha256=%x mode=%o\n", sha256.Sum256(b), st.Mode().Perm())
	}
	if _, err := os.Stat("/init-marker"); err == nil {
		fmt.Fprintln(out, "KILN-BASE-OK")
	}
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}
