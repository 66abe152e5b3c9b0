// Package inventory collects the hardware inventory kiln-agent reports to the
// controller (proto.Inventory, IPA's list_hardware_info shape). It reads sysfs,
// procfs and DMI directly, with ghw for block-device enumeration, because the
// agent runs in a u-root initramfs that has no udev database and no lsblk,
// dmidecode or ethtool: serials, WWNs, HCTL, by-path names and transports are
// derived from sysfs the way udev would. NIC vendor and product are reported
// as PCI IDs ("0x8086"), as IPA does, so no pci.ids database is needed.
//
// Every path is read under Options.Root so tests can point Collect at a
// fixture tree instead of the running machine.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// Options tune one collection.
type Options struct {
	// Root is the directory under which sys/, proc/ and dev/ are read: "/" on
	// a real machine, a fixture tree in tests. Empty means "/".
	Root string
	// BootIF is the BOOTIF kernel argument ("01-52-54-00-12-34-56" or a plain
	// MAC); it becomes boot.pxe_interface.
	BootIF string
	// CollectLLDP listens for LLDP frames on every interface for up to
	// LLDPTimeout (default 30 s, as IPA). It needs the links up and a real
	// root ("/").
	CollectLLDP bool
	LLDPTimeout time.Duration
	// AllowLoop lists loop devices reported like disks (labs and tests that
	// deploy onto loop devices); others are never listed.
	AllowLoop []string
	// Logger receives warnings about data that could not be read; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Collect gathers the inventory of the machine under opts.Root. Missing
// optional data (no DMI, no BMC, a NIC without a PCI address) is left at IPA's
// "unknown" values; only a missing CPU or memory description is an error,
// because the controller cannot schedule on a node without them.
func Collect(ctx context.Context, opts Options) (proto.Inventory, error) {
	root := opts.Root
	if root == "" {
		root = "/"
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var inv proto.Inventory
	var err error

	if inv.CPU, err = readCPU(root); err != nil {
		return inv, fmt.Errorf("collect cpu under %s: %w", root, err)
	}
	if inv.Memory, err = readMemory(ctx, root); err != nil {
		return inv, fmt.Errorf("collect memory under %s: %w", root, err)
	}
	if inv.Disks, err = readDisks(root, opts.AllowLoop, log); err != nil {
		return inv, fmt.Errorf("collect disks under %s: %w", root, err)
	}
	if inv.Interfaces, err = readInterfaces(root, log); err != nil {
		return inv, fmt.Errorf("collect interfaces under %s: %w", root, err)
	}
	if opts.CollectLLDP && len(inv.Interfaces) > 0 {
		timeout := opts.LLDPTimeout
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		names := make([]string, len(inv.Interfaces))
		for i, ifc := range inv.Interfaces {
			names[i] = ifc.Name
		}
		got, err := ListenLLDP(ctx, names, timeout)
		if err != nil {
			log.Warn("LLDP collection failed", "err", err)
		}
		for i := range inv.Interfaces {
			if tlvs, ok := got[inv.Interfaces[i].Name]; ok {
				inv.Interfaces[i].LLDP = tlvs
			} else {
				inv.Interfaces[i].LLDP = []proto.LLDPTLV{}
			}
		}
	}
	inv.SystemVendor = readSystemVendor(root)
	inv.Boot = proto.Boot{CurrentBootMode: proto.BootModeBIOS, PXEInterface: proto.NullString(NormalizeBootIF(opts.BootIF))}
	if exists(filepath.Join(root, "sys/firmware/efi")) {
		inv.Boot.CurrentBootMode = proto.BootModeUEFI
	}
	inv.BMCAddress, inv.BMCV6Address = proto.NoBMCAddress, proto.NoBMCV6Address
	if root == "/" && exists("/dev/ipmi0") {
		bmc, err := ReadBMC(ctx, "/dev/ipmi0")
		if err != nil {
			log.Warn("read BMC LAN configuration", "err", err)
		} else {
			if bmc.IPv4 != "" {
				inv.BMCAddress = bmc.IPv4
			}
			inv.BMCMAC = proto.NullString(bmc.MAC)
		}
	}
	inv.Hostname = readHostname(root)
	return inv, nil
}

// NormalizeBootIF turns the BOOTIF kernel argument, which PXE firmware writes
// as "01-aa-bb-cc-dd-ee-ff" (hardware type 01 = Ethernet), into the MAC form
// "aa:bb:cc:dd:ee:ff"; a value already in MAC form is lower-cased.
func NormalizeBootIF(bootif string) string {
	s := strings.ToLower(strings.TrimSpace(bootif))
	if len(s) == 20 && strings.HasPrefix(s, "01-") {
		s = s[3:]
	}
	return strings.ReplaceAll(s, "-", ":")
}

func readHostname(root string) string {
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/hostname")); err == nil {
		if h := strings.TrimSpace(string(b)); h != "" {
			return h
		}
	}
	if root == "/" {
		if h, err := os.Hostname(); err == nil {
			return h
		}
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readString reads a sysfs attribute, trimmed; "" when absent or unreadable.
func readString(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

var errNoData = errors.New("no data")
