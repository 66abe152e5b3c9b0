package modload

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// QEMU's q35 machine as the e2e tests run it: host bridge, VGA, virtio-net,
// LPC, the ICH9 AHCI controller, SMBus (modaliases read from such a guest's
// /sys/bus/pci/devices/*/modalias).
var q35 = []string{
	"pci:v00008086d000029C0sv00001AF4sd00001100bc06sc00i00",
	"pci:v00001234d00001111sv00001AF4sd00001100bc03sc00i00",
	"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00",
	"pci:v00008086d00002918sv00001AF4sd00001100bc06sc01i00",
	"pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01",
	"pci:v00008086d00002930sv00001AF4sd00001100bc0Csc05i00",
}

// A server: Intel X710 NICs (i40e), an NVMe disk, an xHCI controller (the
// BMC's virtual media is a USB stick), no virtio.
var server = []string{
	"pci:v00008086d00001572sv00008086sd00000000bc02sc00i00",
	"pci:v0000144Dd0000A808sv0000144Dsd0000A801bc01sc08i02",
	"pci:v00008086d0000A36Dsv000015D9sd00001B0Cbc0Csc03i30",
	"pci:v00008086d00003E0Fsv000015D9sd00001B0Cbc06sc00i00",
}

func readTables(t *testing.T, dir string) ([]string, map[string][]string, []Alias) {
	t.Helper()
	open := func(name string) *os.File {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	order, err := ReadOrder(open("order"))
	if err != nil {
		t.Fatal(err)
	}
	deps, err := ReadDeps(open("deps"))
	if err != nil {
		t.Fatal(err)
	}
	aliases, err := ReadAliases(open("aliases"))
	if err != nil {
		t.Fatal(err)
	}
	return order, deps, aliases
}

// TestSelectRealTables runs Select on the tables scripts/fetch-kernel.sh
// writes for Debian's 6.1 kernel and initramfs/modules.txt (testdata).
func TestSelectRealTables(t *testing.T) {
	order, deps, aliases := readTables(t, "testdata")
	for _, tc := range []struct {
		name       string
		pci        []string
		load, skip []string // must be in load / in skip
	}{
		{
			name: "q35 guest",
			pci:  q35,
			load: []string{"virtio_pci.ko", "virtio_net.ko", "net_failover.ko", "virtio_blk.ko", "virtio_scsi.ko",
				"ahci.ko", "libata.ko", "scsi_mod.ko", "sd_mod.ko", "sr_mod.ko", "cdrom.ko",
				"md-mod.ko", "raid1.ko", "raid456.ko", "ext4.ko", "jbd2.ko", "vfat.ko", "isofs.ko", "efivarfs.ko", "button.ko", "evdev.ko", "crc32c-intel.ko"},
			skip: []string{"mlx5_core.ko", "mlxfw.ko", "ice.ko", "i40e.ko", "ixgbe.ko", "bnxt_en.ko", "igb.ko", "e1000e.ko", "e1000.ko",
				"nvme.ko", "nvme-core.ko", "xhci-pci.ko", "usbcore.ko", "usb-storage.ko", "uas.ko", "dca.ko", "libphy.ko"},
		},
		{
			name: "server with X710, NVMe, xHCI",
			pci:  server,
			load: []string{"i40e.ko", "nvme.ko", "nvme-core.ko", "t10-pi.ko", "xhci-pci.ko", "xhci-hcd.ko", "usbcore.ko",
				"usb-storage.ko", "uas.ko", "scsi_mod.ko", "sd_mod.ko", "sr_mod.ko", "ext4.ko", "raid1.ko"},
			skip: []string{"mlx5_core.ko", "ice.ko", "ixgbe.ko", "virtio_pci.ko", "virtio_net.ko", "virtio_blk.ko", "ahci.ko", "libata.ko", "e1000e.ko"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			load, skip := Select(order, deps, aliases, tc.pci)
			t.Logf("%d of %d modules loaded; skipped %q", len(load), len(order), skip)
			if len(load)+len(skip) != len(order) {
				t.Fatalf("load %d + skip %d != %d modules", len(load), len(skip), len(order))
			}
			for _, f := range tc.load {
				if !slices.Contains(load, f) {
					t.Errorf("%s not loaded; skipped %q", f, skip)
				}
			}
			for _, f := range tc.skip {
				if !slices.Contains(skip, f) {
					t.Errorf("%s loaded, want it skipped", f)
				}
			}
			// The order file's order is kept, and every loaded module's
			// dependencies are loaded before it.
			pos := map[string]int{}
			for i, f := range load {
				pos[f] = i
			}
			for i, f := range load {
				for _, d := range deps[f] {
					if p, ok := pos[d]; !ok || p > i {
						t.Errorf("%s loaded without its dependency %s before it", f, d)
					}
				}
			}
			if !slices.IsSortedFunc(load, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) }) {
				t.Errorf("load order %q does not follow the order file", load)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	order := []string{"lib.ko", "nic.ko", "other-nic.ko", "usbcore.ko", "host.ko", "child.ko", "fs.ko"}
	deps := map[string][]string{
		"nic.ko": {"lib.ko"}, "other-nic.ko": {"lib.ko"}, "host.ko": {"usbcore.ko"}, "child.ko": {"usbcore.ko", "lib.ko"},
		"lib.ko": nil, "usbcore.ko": nil, "fs.ko": nil,
	}
	aliases := []Alias{
		{"nic.ko", "pci:v00008086d000010D3sv*sd*bc*sc*i*"},
		{"other-nic.ko", "pci:v000015B3d*sv*sd*bc*sc*i*"},
		{"host.ko", "pci:v*d*sv*sd*bc0Csc03i30*"},
		{"child.ko", "usb:v*p*d*dc*dsc*dp*ic08isc06ip50in*"},
	}
	for _, tc := range []struct {
		name       string
		pci        []string
		load, skip []string
	}{
		{"nothing matches", []string{"pci:v00001234d00001111sv0sd0bc03sc00i00"},
			[]string{"fs.ko"}, []string{"lib.ko", "nic.ko", "other-nic.ko", "usbcore.ko", "host.ko", "child.ko"}},
		{"nic by vendor and device", []string{"pci:v00008086d000010D3sv00008086sd0000A01Fbc02sc00i00"},
			[]string{"lib.ko", "nic.ko", "fs.ko"}, []string{"other-nic.ko", "usbcore.ko", "host.ko", "child.ko"}},
		{"host by class brings the USB core and its drivers", []string{"pci:v00008086d0000A36Dsv0sd0bc0Csc03i30"},
			[]string{"lib.ko", "usbcore.ko", "host.ko", "child.ko", "fs.ko"}, []string{"nic.ko", "other-nic.ko"}},
		{"no PCI devices listed: everything", nil, order, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			load, skip := Select(order, deps, aliases, tc.pci)
			if !reflect.DeepEqual(load, tc.load) || !reflect.DeepEqual(skip, tc.skip) {
				t.Errorf("Select = load %q skip %q, want load %q skip %q", load, skip, tc.load, tc.skip)
			}
		})
	}
}

func TestReadTablesErrors(t *testing.T) {
	for _, in := range []string{"a.ko b.ko\n", "../a.ko: b.ko\n", "a.ko: ../b.ko\n"} {
		if _, err := ReadDeps(strings.NewReader(in)); err == nil {
			t.Errorf("ReadDeps(%q) accepted it", in)
		}
	}
	for _, in := range []string{"a.ko\n", "a.ko pci:x y\n", "dir/a.ko pci:*\n", "a.ko pci:[\n"} {
		if _, err := ReadAliases(strings.NewReader(in)); err == nil {
			t.Errorf("ReadAliases(%q) accepted it", in)
		}
	}
	deps, err := ReadDeps(strings.NewReader("# c\n\na.ko: b.ko c.ko\nb.ko:\n"))
	if err != nil || !reflect.DeepEqual(deps, map[string][]string{"a.ko": {"b.ko", "c.ko"}, "b.ko": {}}) {
		t.Errorf("ReadDeps = %v, %v", deps, err)
	}
}

// TestLoadSkipsUnmatchedDrivers: with the tables beside the order file,
// Load inserts only what the machine's PCI devices (a fake sysfs) need.
func TestLoadSkipsUnmatchedDrivers(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"order":   "lib.ko\nnic.ko\nother-nic.ko\nfs.ko\n",
		"deps":    "lib.ko:\nnic.ko: lib.ko\nother-nic.ko: lib.ko\nfs.ko:\n",
		"aliases": "nic.ko pci:v00008086d000010D3sv*sd*bc*sc*i*\nother-nic.ko pci:v000015B3d*sv*sd*bc*sc*i*\n",
		"lib.ko":  "", "nic.ko": "", "other-nic.ko": "", "fs.ko": "",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sys := t.TempDir()
	dev := filepath.Join(sys, "0000:00:02.0")
	os.Mkdir(dev, 0o755)
	os.WriteFile(filepath.Join(dev, "modalias"), []byte("pci:v00008086d000010D3sv00008086sd0000A01Fbc02sc00i00\n"), 0o644)
	defer func(old string) { pciDevices = old }(pciDevices)

	var seen []string
	insert := func(f *os.File) error { seen = append(seen, filepath.Base(f.Name())); return nil }
	pciDevices = sys
	if _, err := Load(context.Background(), nil, dir, insert); err != nil {
		t.Fatal(err)
	}
	if want := []string{"lib.ko", "nic.ko", "fs.ko"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("inserted %q, want %q", seen, want)
	}

	// No PCI devices readable: every module, as before the tables.
	seen = nil
	pciDevices = filepath.Join(sys, "absent")
	if _, err := Load(context.Background(), nil, dir, insert); err != nil {
		t.Fatal(err)
	}
	if want := []string{"lib.ko", "nic.ko", "other-nic.ko", "fs.ko"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("inserted %q, want %q", seen, want)
	}
}
