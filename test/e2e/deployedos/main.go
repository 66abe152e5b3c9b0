//go:build linux

// Command deployedos is the "operating system" of the e2e test images: the
// /init of a tiny initramfs that the image's bootloaders (SYSLINUX under BIOS,
// a UKI under UEFI) start. It proves that a deployed disk boots: it prints
//
//	KILN-E2E-DEPLOYED-OS image=<id> config-2=<uuid|none> hostname=<name|none>
//
// on the console, where id is the kernel argument kiln.e2e.image= baked into
// the image and uuid/hostname come from the config drive (a partition
// labelled config-2, written by the agent) if there is one. It then idles, as
// an installed system would, until the machine is powered off.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kilnhq/kiln/initramfs/modload"
)

// Marker starts the line the e2e test waits for.
const Marker = "KILN-E2E-DEPLOYED-OS"

func main() {
	_ = os.MkdirAll("/dev", 0o755)
	_ = unix.Mount("devtmpfs", "/dev", "devtmpfs", 0, "")
	_ = os.MkdirAll("/proc", 0o755)
	_ = unix.Mount("proc", "/proc", "proc", 0, "")
	_ = os.MkdirAll("/sys", 0o755)
	_ = unix.Mount("sysfs", "/sys", "sysfs", 0, "")
	// The image carries no /dev/console node (it is built without root):
	// open the console now that devtmpfs provides it.
	if c, err := os.OpenFile("/dev/console", os.O_RDWR, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			_ = unix.Dup2(int(c.Fd()), fd)
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	if _, err := modload.Load(context.Background(), log, modload.Dir, modload.FinitModule); err != nil {
		fmt.Println("deployedos: loading modules:", err)
	}
	image := arg("kiln.e2e.image")
	uuid, host := "none", "none"
	// virtio_blk probes asynchronously; give the partitions a moment.
	for i := range 50 {
		if i == 49 {
			fmt.Println("deployedos: no config-2 device among", describeBlocks())
		}
		if u, h, ok := configDrive(); ok {
			uuid, host = u, h
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("\n%s image=%s config-2=%s hostname=%s\n", Marker, image, uuid, host)
	for {
		time.Sleep(time.Hour) // select{} would end PID 1 ("all goroutines are asleep")
	}
}

// arg returns the value of the kernel argument name=value.
func arg(name string) string {
	b, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return "unknown"
}

// configDrive finds a block device whose ISO 9660 volume ID is config-2 and
// pulls "uuid" and "hostname" out of its meta_data.json. The ISO is a few
// hundred KiB, so the JSON is searched in the raw bytes instead of walking
// the file system.
func configDrive() (uuid, host string, ok bool) {
	devs, _ := filepath.Glob("/sys/class/block/*")
	for _, d := range devs {
		name := filepath.Base(d)
		f, err := os.Open("/dev/" + name)
		if err != nil {
			continue
		}
		head := make([]byte, 0x8000+72)
		if _, err := io.ReadFull(f, head); err != nil {
			f.Close()
			continue
		}
		// Primary volume descriptor at 32 KiB: type 1, "CD001", volume ID at
		// 40 (padded with spaces, or NULs as go-diskfs writes it).
		if string(head[0x8001:0x8006]) != "CD001" || strings.Trim(string(head[0x8000+40:0x8000+72]), " \x00") != "config-2" {
			f.Close()
			continue
		}
		// Config drives are at most 64 MiB; the files may sit anywhere in it.
		buf := make([]byte, 64<<20)
		n, _ := f.ReadAt(buf, 0)
		f.Close()
		buf = buf[:n]
		return jsonString(buf, "uuid"), jsonString(buf, "hostname"), true
	}
	return "", "", false
}

// describeBlocks lists the block devices with what is at the ISO 9660
// descriptor offset, for the log when no config drive is found.
func describeBlocks() string {
	var out []string
	devs, _ := filepath.Glob("/sys/class/block/*")
	for _, d := range devs {
		name := filepath.Base(d)
		desc := name
		if f, err := os.Open("/dev/" + name); err == nil {
			b := make([]byte, 72)
			if _, err := f.ReadAt(b, 0x8000); err == nil {
				desc += fmt.Sprintf("(%q %q)", b[1:6], bytes.TrimSpace(b[40:72]))
			}
			f.Close()
		} else {
			desc += "(" + err.Error() + ")"
		}
		out = append(out, desc)
	}
	return strings.Join(out, " ")
}

// jsonString finds "key": "value" in b and returns value ("none" if absent).
func jsonString(b []byte, key string) string {
	i := bytes.Index(b, []byte(`"`+key+`"`))
	if i < 0 {
		return "none"
	}
	rest := b[i+len(key)+2:]
	q := bytes.IndexByte(rest, '"')
	if q < 0 {
		return "none"
	}
	rest = rest[q+1:]
	e := bytes.IndexByte(rest, '"')
	if e < 0 || e > 200 {
		return "none"
	}
	return string(rest[:e])
}
