package disk

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// How a disk is identified: its bus, the by-path name udev would give it,
// its serial and World Wide Name. One implementation serves both the
// inventory the controller stores and the root device hints matched
// against it, so a hint copied from the inventory selects the same disk.

var errNoDesignator = errors.New("no designator")

// identify fills in d's model, vendor, serial, WWNs, HCTL, transport and
// by-path name from its sysfs directory sysDir (/sys/block/NAME).
func identify(d *Device, sysDir, name string) {
	dev := filepath.Join(sysDir, "device")
	realDev, _ := filepath.EvalSymlinks(dev)
	realBlock, _ := filepath.EvalSymlinks(sysDir)

	d.Model = readString(filepath.Join(dev, "model"))
	d.Vendor = readString(filepath.Join(dev, "vendor"))

	// Serial: the SCSI unit serial page (SATA/SAS/USB through SAT), the NVMe
	// controller's serial, or virtio-blk's serial attribute.
	if pg80, err := os.ReadFile(filepath.Join(dev, "vpd_pg80")); err == nil {
		d.Serial, _ = ParseVPDSerial(pg80)
	}
	for _, p := range []string{filepath.Join(dev, "serial"), filepath.Join(sysDir, "serial")} {
		if d.Serial == "" {
			d.Serial = readString(p)
		}
	}

	// WWN: the LUN's NAA designator from the device identification page, as
	// udev's scsi_id reports it; else the kernel's wwid attribute.
	var ids WWN
	if pg83, err := os.ReadFile(filepath.Join(dev, "vpd_pg83")); err == nil {
		ids, _ = ParseVPDDeviceID(pg83)
	}
	if ids.WWN == "" {
		ids = WWNFromWWID(firstNonEmpty(readString(filepath.Join(sysDir, "wwid")), readString(filepath.Join(dev, "wwid"))))
	}
	d.WWN, d.WWNWithExtension, d.WWNVendorExtension = ids.WWN, ids.WithExtension, ids.VendorExtension

	if realDev != "" && hctlRE.MatchString(filepath.Base(realDev)) {
		d.HCTL = filepath.Base(realDev)
	}
	d.Tran = transport(name, realBlock)
	if id := pathID(name, sysDir, realBlock); id != "" {
		d.ByPath = "/dev/disk/by-path/" + id
	}
}

var (
	hctlRE = regexp.MustCompile(`^\d+:\d+:\d+:\d+$`)
	pciRE  = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	ataRE  = regexp.MustCompile(`^ata(\d+)$`)
	hostRE = regexp.MustCompile(`^host(\d+)$`)
)

// transport names the disk's bus as lsblk's TRAN column does.
func transport(name, realPath string) string {
	switch {
	case strings.HasPrefix(name, "nvme"):
		return "nvme"
	case strings.HasPrefix(name, "vd"):
		return "virtio"
	case strings.HasPrefix(name, "mmcblk"):
		return "mmc"
	}
	parts := strings.Split(realPath, "/")
	has := func(pred func(string) bool) bool {
		for _, p := range parts {
			if pred(p) {
				return true
			}
		}
		return false
	}
	switch {
	case has(func(p string) bool { return strings.HasPrefix(p, "usb") }):
		return "usb"
	case has(func(p string) bool { return ataRE.MatchString(p) }):
		return "sata"
	case has(func(p string) bool { return strings.HasPrefix(p, "end_device-") || strings.HasPrefix(p, "expander-") }):
		return "sas"
	case has(func(p string) bool { return strings.HasPrefix(p, "rport-") }):
		return "fc"
	case has(func(p string) bool { return strings.HasPrefix(p, "session") }):
		return "iscsi"
	}
	return ""
}

// pathID computes the name udev's path_id gives the disk under
// /dev/disk/by-path for the common buses: ATA ("pci-…-ata-P.L"), NVMe
// ("pci-…-nvme-N"), virtio-blk ("pci-…"), SAS ("pci-…-sas-ADDR-lun-L"), USB
// and other SCSI ("pci-…-scsi-H:C:T:L", H relative to the adapter's first
// host). "" when the
// disk is not under a PCI device.
func pathID(name, sysDir, realPath string) string {
	parts := strings.Split(realPath, "/")
	pciIdx := -1
	for i, p := range parts {
		if pciRE.MatchString(p) {
			pciIdx = i
		}
	}
	if pciIdx < 0 {
		return ""
	}
	pci := "pci-" + parts[pciIdx]
	rest := parts[pciIdx+1:]
	switch {
	case strings.HasPrefix(name, "nvme"):
		nsid := readString(filepath.Join(sysDir, "nsid"))
		if nsid == "" {
			if i := strings.LastIndex(name, "n"); i > 0 {
				nsid = name[i+1:]
			}
		}
		return pci + "-nvme-" + nsid
	case strings.HasPrefix(name, "vd"):
		return pci
	}
	var hctl []int
	hostIdx := -1
	for i, p := range rest {
		if hctlRE.MatchString(p) {
			for _, n := range strings.Split(p, ":") {
				v, _ := strconv.Atoi(n)
				hctl = append(hctl, v)
			}
		}
		if hostRE.MatchString(p) {
			hostIdx = i
		}
	}
	if hctl == nil {
		return ""
	}
	for i, p := range rest {
		if m := ataRE.FindStringSubmatch(p); m != nil {
			port := readString(filepath.Join(append([]string{"/"}, append(parts[:pciIdx+1], rest[:i+1]...)...)...) + "/ata_port/" + p + "/port_no")
			if port == "" {
				port = m[1]
			}
			if hctl[1] != 0 {
				return fmt.Sprintf("%s-ata-%s.%d.0", pci, port, hctl[1])
			}
			return fmt.Sprintf("%s-ata-%s.%d", pci, port, hctl[3])
		}
		if strings.HasPrefix(p, "end_device-") {
			dir := filepath.Join(append([]string{"/"}, append(parts[:pciIdx+1], rest[:i+1]...)...)...)
			if addr := readString(filepath.Join(dir, "sas_device", p, "sas_address")); addr != "" {
				return fmt.Sprintf("%s-sas-%s-lun-%d", pci, addr, hctl[3])
			}
		}
		if strings.HasPrefix(p, "usb") && i+1 < len(rest) {
			// The USB interface directory ("1-1:1.0") follows the port path.
			for _, q := range rest[i+1:] {
				if strings.Contains(q, ":") && strings.Contains(q, "-") && !hctlRE.MatchString(q) {
					return fmt.Sprintf("%s-usb-0:%s-scsi-0:%d:%d:%d", pci, q[strings.Index(q, "-")+1:], hctl[1], hctl[2], hctl[3])
				}
			}
		}
	}
	host := hctl[0]
	if hostIdx > 0 {
		// path_id numbers hosts relative to the lowest one on the same adapter.
		parent := filepath.Join(append([]string{"/"}, append(parts[:pciIdx+1], rest[:hostIdx]...)...)...)
		if entries, err := os.ReadDir(parent); err == nil {
			base := host
			for _, e := range entries {
				if m := hostRE.FindStringSubmatch(e.Name()); m != nil {
					if n, _ := strconv.Atoi(m[1]); n < base {
						base = n
					}
				}
			}
			host -= base
		}
	}
	return fmt.Sprintf("%s-scsi-%d:%d:%d:%d", pci, host, hctl[1], hctl[2], hctl[3])
}

// WWN holds a disk's World Wide Name as udev reports it: WWN is the 64-bit
// NAA identifier ("0x5000c500a1b2c3d4"), WithExtension the full designator
// (128 bits for NAA type 6), VendorExtension the part beyond the first 64 bits.
type WWN struct {
	WWN, WithExtension, VendorExtension string
}

// ParseVPDSerial decodes SCSI VPD page 0x80 (unit serial number).
func ParseVPDSerial(page []byte) (string, error) {
	if len(page) < 4 || page[1] != 0x80 {
		return "", fmt.Errorf("not a VPD page 0x80")
	}
	n := int(page[2])<<8 | int(page[3])
	body := page[4:]
	if n < len(body) {
		body = body[:n]
	}
	return strings.TrimSpace(strings.TrimRight(string(body), "\x00")), nil
}

// ParseVPDDeviceID decodes SCSI VPD page 0x83 (device identification) and
// returns the WWN from the first NAA designator associated with the LUN; an
// EUI-64 designator is used when there is no NAA one.
func ParseVPDDeviceID(page []byte) (WWN, error) {
	if len(page) < 4 || page[1] != 0x83 {
		return WWN{}, fmt.Errorf("not a VPD page 0x83")
	}
	n := int(page[2])<<8 | int(page[3])
	body := page[4:]
	if n < len(body) {
		body = body[:n]
	}
	var eui WWN
	for len(body) >= 4 {
		codeSet := body[0] & 0x0f
		assoc := (body[1] >> 4) & 0x3
		typ := body[1] & 0x0f
		l := int(body[3])
		if 4+l > len(body) {
			break
		}
		id := body[4 : 4+l]
		body = body[4+l:]
		if assoc != 0 || codeSet != 1 || l == 0 {
			continue
		}
		switch typ {
		case 3: // NAA
			return naaWWN(id), nil
		case 2: // EUI-64
			if eui.WWN == "" && l >= 8 {
				h := hex.EncodeToString(id)
				eui = WWN{WWN: "0x" + h[:16], WithExtension: "0x" + h}
				if len(h) > 16 {
					eui.VendorExtension = "0x" + h[16:]
				}
			}
		}
	}
	if eui.WWN != "" {
		return eui, nil
	}
	return WWN{}, fmt.Errorf("no NAA or EUI-64 designator for the LUN: %w", errNoDesignator)
}

func naaWWN(id []byte) WWN {
	h := hex.EncodeToString(id)
	if len(h) <= 16 {
		return WWN{WWN: "0x" + h, WithExtension: "0x" + h}
	}
	return WWN{WWN: "0x" + h[:16], WithExtension: "0x" + h, VendorExtension: "0x" + h[16:]}
}

// WWNFromWWID converts the kernel's wwid attribute: "naa.<hex>" becomes the
// udev "0x…" form; NVMe identifiers ("eui.…", "nvme.…", UUIDs) are kept as
// the kernel prints them, which is what udev puts in ID_WWN for NVMe; T10
// vendor identifiers ("t10.…") are not WWNs.
func WWNFromWWID(wwid string) WWN {
	wwid = strings.TrimSpace(wwid)
	switch {
	case wwid == "", strings.HasPrefix(wwid, "t10."):
		return WWN{}
	case strings.HasPrefix(wwid, "naa."):
		b, err := hex.DecodeString(wwid[4:])
		if err != nil || len(b) == 0 {
			return WWN{}
		}
		return naaWWN(b)
	}
	return WWN{WWN: wwid, WithExtension: wwid}
}
