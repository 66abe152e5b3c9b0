package disk

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Device is one whole block device as the agent reports it in the
// inventory (the JSON names are IPA's) and as root device hints see it.
type Device struct {
	Name               string `json:"name"` // "/dev/sda"
	Model              string `json:"model"`
	Size               int64  `json:"size"` // bytes
	Rotational         bool   `json:"rotational"`
	WWN                string `json:"wwn"`
	WWNWithExtension   string `json:"wwn_with_extension"`
	WWNVendorExtension string `json:"wwn_vendor_extension"`
	Serial             string `json:"serial"`
	Vendor             string `json:"vendor"`
	HCTL               string `json:"hctl"`             // "0:0:0:0" for SCSI/ATA disks, else ""
	ByPath             string `json:"by_path"`          // "/dev/disk/by-path/…" when known
	Tran               string `json:"tran"`             // "sata", "sas", "nvme", "usb", "virtio", …
	LogicalSectors     int    `json:"logical_sectors"`  // logical sector size, bytes
	PhysicalSectors    int    `json:"physical_sectors"` // physical sector size, bytes
	ReadOnly           bool   `json:"-"`
	Removable          bool   `json:"-"`
	Kind               Kind   `json:"-"`
}

// Kind says what sort of block device a /sys/block entry is, which decides
// whether it can be a deploy target at all.
type Kind string

// Kinds of block devices. Only KindDisk and KindMD are listed by default;
// KindLoop only when allowlisted (tests, labs).
const (
	KindDisk  Kind = "disk"
	KindMD    Kind = "md"
	KindLoop  Kind = "loop"
	KindRAM   Kind = "ram"   // ram*, zram*
	KindDM    Kind = "dm"    // device-mapper
	KindROM   Kind = "rom"   // sr*, optical drives
	KindNBD   Kind = "nbd"   // network block devices
	KindOther Kind = "other" // floppies, mmc boot areas, …
)

// EnumerateOptions tune Enumerate.
type EnumerateOptions struct {
	// AllowLoop lists loop devices ("/dev/loop3" or "loop3") that are
	// reported like disks. Other loop devices are skipped.
	AllowLoop []string
}

// DefaultSysRoot is where sysfs is mounted.
const DefaultSysRoot = "/sys"

// Enumerate lists the whole-disk block devices under sysRoot/block (sysRoot
// "" means DefaultSysRoot), sorted by name. Ramdisks, optical and
// device-mapper devices, read-only and zero-size devices, hidden NVMe
// multipath paths and loop devices that are not allowlisted are skipped:
// none of them can hold an operating system image.
func Enumerate(sysRoot string, opts EnumerateOptions) ([]Device, error) {
	if sysRoot == "" {
		sysRoot = DefaultSysRoot
	}
	blockDir := filepath.Join(sysRoot, "block")
	entries, err := os.ReadDir(blockDir)
	if err != nil {
		return nil, fmt.Errorf("enumerate block devices in %s: %w", blockDir, err)
	}
	var out []Device
	for _, e := range entries {
		name := e.Name()
		kind := classify(name)
		switch kind {
		case KindDisk, KindMD:
		case KindLoop:
			if !slices.ContainsFunc(opts.AllowLoop, func(a string) bool {
				return strings.TrimPrefix(a, "/dev/") == name
			}) {
				continue
			}
		default:
			continue
		}
		dir := filepath.Join(blockDir, name)
		if readString(filepath.Join(dir, "hidden")) == "1" {
			continue
		}
		d, err := readDevice(dir, name, kind)
		if err != nil {
			return nil, fmt.Errorf("enumerate block devices: %w", err)
		}
		if d.Size == 0 || d.ReadOnly {
			continue
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Device) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

var mmcBootRE = regexp.MustCompile(`^mmcblk\d+(boot\d+|rpmb)$`)

func classify(name string) Kind {
	switch {
	case strings.HasPrefix(name, "ram"), strings.HasPrefix(name, "zram"):
		return KindRAM
	case strings.HasPrefix(name, "loop"):
		return KindLoop
	case strings.HasPrefix(name, "md"):
		return KindMD
	case strings.HasPrefix(name, "dm-"):
		return KindDM
	case strings.HasPrefix(name, "sr"), strings.HasPrefix(name, "scd"):
		return KindROM
	case strings.HasPrefix(name, "nbd"):
		return KindNBD
	case strings.HasPrefix(name, "fd"), mmcBootRE.MatchString(name):
		return KindOther
	}
	return KindDisk
}

func readDevice(dir, name string, kind Kind) (Device, error) {
	sectors, err := strconv.ParseInt(readString(filepath.Join(dir, "size")), 10, 64)
	if err != nil {
		return Device{}, fmt.Errorf("read size of %s: %w", name, err)
	}
	d := Device{
		Name:            "/dev/" + name,
		Size:            sectors * 512, // sysfs counts 512-byte units whatever the sector size
		Rotational:      readString(filepath.Join(dir, "queue/rotational")) == "1",
		ReadOnly:        readString(filepath.Join(dir, "ro")) == "1",
		Removable:       readString(filepath.Join(dir, "removable")) == "1",
		LogicalSectors:  readInt(filepath.Join(dir, "queue/logical_block_size"), 512),
		PhysicalSectors: readInt(filepath.Join(dir, "queue/physical_block_size"), 512),
		Kind:            kind,
	}
	identify(&d, dir, name)
	return d, nil
}

func readString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readInt(path string, def int) int {
	n, err := strconv.Atoi(readString(path))
	if err != nil || n <= 0 {
		return def
	}
	return n
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
