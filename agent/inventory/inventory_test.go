package inventory

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	gcinv "github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"

	"github.com/kilnhq/kiln/proto"
)

func TestCollectFixture(t *testing.T) {
	root := buildFixture(t, "machine1")
	inv, err := Collect(context.Background(), Options{Root: root, BootIF: "01-3C-EC-EF-12-34-56"})
	if err != nil {
		t.Fatal(err)
	}
	want := proto.Inventory{
		CPU: proto.CPU{
			ModelName: "Intel(R) Xeon(R) Silver 4210 CPU @ 2.20GHz", Frequency: "3200.000", Count: 4,
			Architecture: architecture(), Flags: []string{"fpu", "vme", "sse", "sse2", "avx"}, SocketCount: 2,
		},
		Memory: proto.Memory{Total: 16318712 * 1024, PhysicalMB: 16 * 1024},
		Disks: []proto.Disk{{
			Name: "/dev/nvme0n1", Model: "Samsung SSD 980 PRO 1TB", Size: 1953525168 * 512,
			WWN: "eui.002538b911b2c3d4", WWNWithExtension: "eui.002538b911b2c3d4", Serial: "S5GXNF0R123456",
			ByPath: "/dev/disk/by-path/pci-0000:3d:00.0-nvme-1", LogicalSectors: 512, PhysicalSectors: 512, Tran: "nvme",
		}, {
			Name: "/dev/sda", Model: "SAMSUNG MZ7LH480", Size: 937703088 * 512, Vendor: "ATA",
			WWN: "0x5002538e40a1b2c3", WWNWithExtension: "0x5002538e40a1b2c3", Serial: "S45PNA0M123456",
			HCTL: "0:0:0:0", ByPath: "/dev/disk/by-path/pci-0000:00:17.0-ata-1.0",
			LogicalSectors: 512, PhysicalSectors: 4096, Tran: "sata",
		}, {
			Name: "/dev/sdb", Model: "ST2000NM0045", Size: 3907029168 * 512, Rotational: true, Vendor: "SEAGATE",
			WWN: "0x6000c500a1b2c3d4", WWNWithExtension: "0x6000c500a1b2c3d40000000000001234",
			WWNVendorExtension: "0x0000000000001234", Serial: "ZA1B2C3D0000R123", HCTL: "3:0:4:0",
			ByPath:         "/dev/disk/by-path/pci-0000:3b:00.0-sas-0x5000c500a1b2c3d5-lun-0",
			LogicalSectors: 512, PhysicalSectors: 512, Tran: "sas",
		}, {
			Name: "/dev/vda", Size: 20971520 * 512, Rotational: true, Vendor: "0x1af4", Serial: "kiln-vda-1",
			ByPath: "/dev/disk/by-path/pci-0000:00:04.0", LogicalSectors: 512, PhysicalSectors: 512, Tran: "virtio",
		}},
		Interfaces: []proto.Interface{{
			Name: "eno1", MACAddress: "3c:ec:ef:12:34:56", HasCarrier: true, Vendor: "0x8086", Product: "0x15bb",
			SpeedMbps: 1000, PCIAddress: "0000:00:1f.6", Driver: "e1000e",
		}, {
			Name: "ens3", MACAddress: "52:54:00:12:34:56", Vendor: "0x1af4", Product: "0x0001",
			PCIAddress: "0000:00:03.0", Driver: "virtio_net",
		}},
		BMCAddress:   "0.0.0.0",
		BMCV6Address: "::/0",
		SystemVendor: proto.SystemVendor{
			ProductName: "PowerEdge R640", SerialNumber: "7XK2Q33", Manufacturer: "Dell Inc.",
			Firmware: proto.Firmware{Vendor: "Dell Inc.", Version: "2.17.1", BuildDate: "11/30/2022"},
		},
		Boot:     proto.Boot{CurrentBootMode: "uefi", PXEInterface: "3c:ec:ef:12:34:56"},
		Hostname: "fixture-node",
	}
	if !reflect.DeepEqual(inv.CPU, want.CPU) {
		t.Errorf("cpu\n got %+v\nwant %+v", inv.CPU, want.CPU)
	}
	if inv.Memory != want.Memory {
		t.Errorf("memory got %+v want %+v", inv.Memory, want.Memory)
	}
	if len(inv.Disks) != len(want.Disks) {
		t.Errorf("disks: got %d, want %d: %+v", len(inv.Disks), len(want.Disks), inv.Disks)
	}
	for i := range min(len(inv.Disks), len(want.Disks)) {
		if inv.Disks[i] != want.Disks[i] {
			t.Errorf("disk %d\n got %+v\nwant %+v", i, inv.Disks[i], want.Disks[i])
		}
	}
	if !reflect.DeepEqual(inv.Interfaces, want.Interfaces) {
		t.Errorf("interfaces\n got %+v\nwant %+v", inv.Interfaces, want.Interfaces)
	}
	inv.CPU, inv.Memory, inv.Disks, inv.Interfaces = want.CPU, want.Memory, want.Disks, want.Interfaces
	if !reflect.DeepEqual(inv, want) {
		t.Errorf("inventory\n got %+v\nwant %+v", inv, want)
	}
	checkJSONKinds(t, inv)
}

// checkJSONKinds decodes the inventory's JSON generically and with gophercloud's
// fixed types and checks the JSON types spec §4 demands.
func checkJSONKinds(t *testing.T, inv proto.Inventory) {
	t.Helper()
	raw, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	isInt := func(v any) bool { f, ok := v.(float64); return ok && f == float64(int64(f)) }
	isStr := func(v any) bool { _, ok := v.(string); return ok }
	isNStr := func(v any) bool { return v == nil || isStr(v) }
	isBool := func(v any) bool { _, ok := v.(bool); return ok }
	cpu := m["cpu"].(map[string]any)
	if !isStr(cpu["frequency"]) || !isInt(cpu["count"]) || !isInt(cpu["socket_count"]) || !isStr(cpu["model_name"]) {
		t.Errorf("cpu JSON types: %v", cpu)
	}
	mem := m["memory"].(map[string]any)
	if !isInt(mem["total"]) || !isInt(mem["physical_mb"]) {
		t.Errorf("memory JSON types: %v", mem)
	}
	for _, d := range m["disks"].([]any) {
		d := d.(map[string]any)
		if !isStr(d["name"]) || !isInt(d["size"]) || !isBool(d["rotational"]) || !isInt(d["logical_sectors"]) || !isInt(d["physical_sectors"]) {
			t.Errorf("disk JSON types: %v", d)
		}
		for _, k := range []string{"model", "wwn", "serial", "vendor", "wwn_with_extension", "wwn_vendor_extension", "hctl", "by_path", "tran"} {
			if v, ok := d[k]; !ok || !isNStr(v) {
				t.Errorf("disk %v: %s = %v, want string or null", d["name"], k, v)
			}
		}
	}
	for _, i := range m["interfaces"].([]any) {
		i := i.(map[string]any)
		if !isStr(i["name"]) || !isStr(i["mac_address"]) || !isBool(i["has_carrier"]) || !isInt(i["speed_mbps"]) || !isStr(i["biosdevname"]) {
			t.Errorf("interface JSON types: %v", i)
		}
		if l, ok := i["lldp"]; !ok || (l != nil && reflect.TypeOf(l).Kind() != reflect.Slice) {
			t.Errorf("interface lldp = %v, want null or list", l)
		}
	}
	if !isStr(m["bmc_address"]) || !isStr(m["bmc_v6address"]) || !isStr(m["hostname"]) {
		t.Errorf("top-level JSON types: %v", m)
	}
	if bm := m["boot"].(map[string]any)["current_boot_mode"]; bm != "uefi" && bm != "bios" {
		t.Errorf("boot mode %v", bm)
	}
	var gc gcinv.InventoryType
	if err := json.Unmarshal(raw, &gc); err != nil {
		t.Fatalf("gophercloud decode: %v", err)
	}
	if len(gc.Disks) != len(inv.Disks) || len(gc.Interfaces) != len(inv.Interfaces) || gc.CPU.Count != inv.CPU.Count ||
		int64(gc.Memory.Total) != inv.Memory.Total || gc.CPU.Frequency != inv.CPU.Frequency {
		t.Errorf("gophercloud view differs: %+v", gc)
	}
	for i, d := range gc.Disks {
		if d.Serial != string(inv.Disks[i].Serial) || d.Wwn != string(inv.Disks[i].WWN) || d.Size != inv.Disks[i].Size {
			t.Errorf("gophercloud disk %d: %+v", i, d)
		}
	}
}

// TestCollectThisMachine collects from the real root: whatever this machine
// is, it has CPUs, memory, at least one disk and a hostname.
func TestCollectThisMachine(t *testing.T) {
	inv, err := Collect(context.Background(), Options{Root: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if inv.CPU.Count < 1 || inv.CPU.Architecture == "" || inv.CPU.SocketCount < 1 {
		t.Errorf("cpu: %+v", inv.CPU)
	}
	if inv.Memory.Total < 64<<20 || inv.Memory.PhysicalMB*(1<<20) < inv.Memory.Total {
		t.Errorf("memory: %+v", inv.Memory)
	}
	if len(inv.Disks) == 0 {
		t.Fatalf("no disks found on this machine")
	}
	for _, d := range inv.Disks {
		if !strings.HasPrefix(d.Name, "/dev/") || d.Size <= 0 || d.LogicalSectors < 512 ||
			strings.HasPrefix(d.Name, "/dev/loop") || strings.HasPrefix(d.Name, "/dev/zram") {
			t.Errorf("bad disk %+v", d)
		}
	}
	if inv.Hostname == "" || inv.BMCAddress == "" {
		t.Errorf("hostname %q bmc %q", inv.Hostname, inv.BMCAddress)
	}
	for _, i := range inv.Interfaces {
		if i.Name == "lo" || i.MACAddress == "" {
			t.Errorf("bad interface %+v", i)
		}
	}
	checkJSONKinds(t, inv)
	t.Logf("cpu %+v memory %+v disks %+v interfaces %+v", inv.CPU, inv.Memory, inv.Disks, inv.Interfaces)
}

func TestNormalizeBootIF(t *testing.T) {
	for in, want := range map[string]string{
		"01-52-54-00-AB-cd-ef":   "52:54:00:ab:cd:ef",
		"52:54:00:AB:CD:EF":      "52:54:00:ab:cd:ef",
		"":                       "",
		" 01-aa-bb-cc-dd-ee-ff ": "aa:bb:cc:dd:ee:ff",
	} {
		if got := NormalizeBootIF(in); got != want {
			t.Errorf("NormalizeBootIF(%q) = %q, want %q", in, got, want)
		}
	}
}
