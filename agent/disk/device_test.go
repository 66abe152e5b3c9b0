package disk

import (
	"strings"
	"testing"
)

func TestEnumerateFixture(t *testing.T) {
	devs, err := Enumerate("testdata/sys", EnumerateOptions{AllowLoop: []string{"/dev/loop0", "loop1"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]Device{}
	for _, d := range devs {
		names = append(names, d.Name)
		byName[d.Name] = d
	}
	// loop1 is allowlisted but empty; sdd is read-only; sde is empty;
	// nvme0c0n1 is a hidden multipath node; ram, zram, sr, dm are never disks.
	want := "/dev/loop0 /dev/md0 /dev/nvme0n1 /dev/sda /dev/sdb /dev/sdc /dev/vda /dev/vdb"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("devices = %s, want %s", got, want)
	}
	checks := []struct {
		got, want any
		what      string
	}{
		{byName["/dev/sda"].Size, int64(500) << 30, "sda size"},
		{byName["/dev/sda"].Model, "Samsung SSD 860", "sda model"},
		{byName["/dev/sda"].Vendor, "ATA", "sda vendor"},
		{byName["/dev/sda"].Serial, "S3Z9NB0K", "sda serial (vpd_pg80)"},
		{byName["/dev/sda"].WWN, "0x5002538e40a1b2c3", "sda wwn"},
		{byName["/dev/sda"].WWNWithExtension, "0x5002538e40a1b2c3", "sda wwn_with_extension"},
		{byName["/dev/sda"].HCTL, "0:0:0:0", "sda hctl"},
		{byName["/dev/sda"].Tran, "sata", "sda tran"},
		{byName["/dev/sda"].Rotational, true, "sda rotational"},
		{byName["/dev/sda"].PhysicalSectors, 4096, "sda physical sectors"},
		{byName["/dev/sda"].LogicalSectors, 512, "sda logical sectors"},
		{byName["/dev/sda"].ByPath, "/dev/disk/by-path/pci-0000:00:1f.2-ata-1.0", "sda by_path"},
		{byName["/dev/sdb"].WWN, "0x600508b1001c3a5e", "sdb wwn"},
		{byName["/dev/sdb"].WWNVendorExtension, "0x2b5f31ff8b7d1e4a", "sdb wwn_vendor_extension"},
		{byName["/dev/sdb"].WWNWithExtension, "0x600508b1001c3a5e2b5f31ff8b7d1e4a", "sdb wwn_with_extension"},
		{byName["/dev/sdb"].Tran, "sas", "sdb tran"},
		{byName["/dev/sdb"].Serial, "ZC1B2C3D4E", "sdb serial"},
		{byName["/dev/nvme0n1"].Tran, "nvme", "nvme tran"},
		{byName["/dev/nvme0n1"].Serial, "S4EWNX0R123456", "nvme serial"},
		{byName["/dev/nvme0n1"].WWN, "eui.0025388b91b00e41", "nvme wwn"},
		{byName["/dev/nvme0n1"].Rotational, false, "nvme rotational"},
		{byName["/dev/nvme0n1"].ByPath, "/dev/disk/by-path/pci-0000:00:03.0-nvme-1", "nvme by_path"},
		{byName["/dev/nvme0n1"].HCTL, "", "nvme hctl"},
		{byName["/dev/vda"].Serial, "vda-serial", "vda serial"},
		{byName["/dev/vda"].Tran, "virtio", "vda tran"},
		{byName["/dev/sdc"].Tran, "usb", "sdc tran"},
		{byName["/dev/sdc"].Removable, true, "sdc removable"},
		{byName["/dev/md0"].Kind, KindMD, "md0 kind"},
		{byName["/dev/loop0"].Kind, KindLoop, "loop0 kind"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestEnumerateSkipsLoopUnlessAllowed(t *testing.T) {
	devs, err := Enumerate("testdata/sys", EnumerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Kind == KindLoop {
			t.Errorf("loop device %s listed without an allowlist", d.Name)
		}
	}
}

func TestEnumerateMissingRoot(t *testing.T) {
	if _, err := Enumerate("testdata/nonexistent", EnumerateOptions{}); err == nil || !strings.Contains(err.Error(), "testdata/nonexistent/block") {
		t.Fatalf("err = %v, want one naming the missing directory", err)
	}
}

func TestEnumerateRealSysfs(t *testing.T) {
	// The real machine's sysfs must parse; whatever it holds, no device
	// may be empty, read-only or a ramdisk.
	devs, err := Enumerate("", EnumerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Size <= 0 || d.ReadOnly || d.Kind == KindRAM || d.Kind == KindLoop {
			t.Errorf("listed unusable device %+v", d)
		}
	}
}

func TestGuard(t *testing.T) {
	g := Guard{Allow: []string{"/dev/loop3"}}
	for _, dev := range []string{"/dev/loop3", "/dev/../dev/loop3"} {
		if err := g.Check(dev); err != nil {
			t.Errorf("allowlisted device %s refused: %v", dev, err)
		}
	}
	err := g.Check("/dev/sda")
	if err == nil || !strings.Contains(err.Error(), "/dev/sda") || !strings.Contains(err.Error(), "--allow-device") {
		t.Errorf("non-allowlisted device: err = %v", err)
	}
	if err := (Guard{InRamdisk: true}).Check("/dev/sda"); err != nil {
		t.Errorf("ramdisk guard refused: %v", err)
	}
	if err := (Guard{}).Check("/dev/sda"); err == nil {
		t.Error("zero Guard allowed /dev/sda")
	}
}
