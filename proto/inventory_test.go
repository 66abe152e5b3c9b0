package proto

import (
	"encoding/json"
	"reflect"
	"testing"

	gcinv "github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"
)

func sampleInventory() Inventory {
	return Inventory{
		CPU: CPU{ModelName: "Intel(R) Xeon(R) Gold 6338", Frequency: "2000.000", Count: 4,
			Architecture: "x86_64", Flags: []string{"fpu", "sse2"}, SocketCount: 1},
		Memory: Memory{Total: 8 << 30, PhysicalMB: 8192},
		Disks: []Disk{{
			Name: "/dev/sda", Model: "SAMSUNG MZ7L3", Size: 480103981056, Rotational: false,
			WWN: "0x5002538e4012ab34", Serial: "S3Z5NB0K123456", Vendor: "ATA",
			WWNWithExtension: "0x5002538e4012ab34", HCTL: "0:0:0:0",
			ByPath: "/dev/disk/by-path/pci-0000:00:17.0-ata-1", LogicalSectors: 512,
			PhysicalSectors: 4096, Tran: "sata",
		}, {Name: "/dev/vda", Size: 1 << 30, Rotational: true, Vendor: "0x1af4", LogicalSectors: 512, PhysicalSectors: 512, Tran: "virtio"}},
		Interfaces: []Interface{{
			Name: "eth0", MACAddress: "52:54:00:12:34:56", IPv4Address: "192.0.2.10",
			IPv6Address: "2001:db8::10", HasCarrier: true,
			LLDP:   []LLDPTLV{{Type: 1, Value: "04525400123456"}, {Type: 0, Value: ""}},
			Vendor: "0x8086", Product: "0x100e", SpeedMbps: 1000,
			PCIAddress: "0000:00:03.0", Driver: "e1000",
		}, {Name: "eth1", MACAddress: "52:54:00:12:34:57"}},
		BMCAddress:   "192.0.2.200",
		BMCV6Address: NoBMCV6Address,
		SystemVendor: SystemVendor{ProductName: "Standard PC", SerialNumber: "123",
			Manufacturer: "QEMU", Firmware: Firmware{Vendor: "EDK II", Version: "1.0", BuildDate: "02/06/2015"}},
		Boot:     Boot{CurrentBootMode: BootModeUEFI, PXEInterface: "52:54:00:12:34:56"},
		Hostname: "node-1",
	}
}

// kind names a JSON value's type the way spec §4 talks about it.
func kind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case float64:
		if x == float64(int64(x)) {
			return "int"
		}
		return "float"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return "?"
}

// TestInventoryJSONTypes checks every key of spec §4 is present with its JSON type.
func TestInventoryJSONTypes(t *testing.T) {
	raw, err := json.Marshal(sampleInventory())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	check := func(obj map[string]any, want map[string][]string, where string) {
		t.Helper()
		for key, kinds := range want {
			v, ok := obj[key]
			if !ok {
				t.Errorf("%s: key %q missing", where, key)
				continue
			}
			k := kind(v)
			found := false
			for _, w := range kinds {
				found = found || w == k
			}
			if !found {
				t.Errorf("%s.%s: JSON kind %s, want one of %v", where, key, k, kinds)
			}
		}
		for key := range obj {
			if _, ok := want[key]; !ok {
				t.Errorf("%s: unexpected key %q", where, key)
			}
		}
	}
	str, nstr := []string{"string"}, []string{"string", "null"}
	check(m, map[string][]string{
		"cpu": {"object"}, "memory": {"object"}, "disks": {"list"}, "interfaces": {"list"},
		"bmc_address": str, "bmc_v6address": str, "bmc_mac": nstr, "system_vendor": {"object"},
		"boot": {"object"}, "hostname": str,
	}, "inventory")
	check(m["cpu"].(map[string]any), map[string][]string{
		"model_name": str, "frequency": str, "count": {"int"}, "architecture": str,
		"flags": {"list"}, "socket_count": {"int"},
	}, "cpu")
	check(m["memory"].(map[string]any), map[string][]string{"total": {"int"}, "physical_mb": {"int"}}, "memory")
	diskKinds := map[string][]string{
		"name": str, "model": nstr, "size": {"int"}, "rotational": {"bool"}, "wwn": nstr,
		"serial": nstr, "vendor": nstr, "wwn_with_extension": nstr, "wwn_vendor_extension": nstr,
		"hctl": nstr, "by_path": nstr, "logical_sectors": {"int"}, "physical_sectors": {"int"}, "tran": nstr,
	}
	for _, d := range m["disks"].([]any) {
		check(d.(map[string]any), diskKinds, "disk")
	}
	d0 := m["disks"].([]any)[0].(map[string]any)
	if d0["serial"] != "S3Z5NB0K123456" || d0["hctl"] != "0:0:0:0" {
		t.Errorf("disk strings lost: %v", d0)
	}
	if d1 := m["disks"].([]any)[1].(map[string]any); d1["wwn"] != nil || d1["serial"] != nil {
		t.Errorf("unknown disk values must be null, got wwn=%v serial=%v", d1["wwn"], d1["serial"])
	}
	ifKinds := map[string][]string{
		"name": str, "mac_address": str, "ipv4_address": nstr, "ipv6_address": nstr,
		"has_carrier": {"bool"}, "lldp": {"null", "list"}, "vendor": nstr, "product": nstr,
		"client_id": nstr, "biosdevname": str, "speed_mbps": {"int"}, "pci_address": nstr, "driver": nstr,
	}
	for _, i := range m["interfaces"].([]any) {
		check(i.(map[string]any), ifKinds, "interface")
	}
	lldp := m["interfaces"].([]any)[0].(map[string]any)["lldp"].([]any)
	for _, tlv := range lldp {
		pair := tlv.([]any)
		if len(pair) != 2 || kind(pair[0]) != "int" || kind(pair[1]) != "string" {
			t.Errorf("lldp TLV %v, want [int, \"hex\"]", pair)
		}
	}
	if m["interfaces"].([]any)[1].(map[string]any)["lldp"] != nil {
		t.Error("uncollected LLDP must be null")
	}
	sv := m["system_vendor"].(map[string]any)
	check(sv, map[string][]string{"product_name": str, "serial_number": str, "manufacturer": str, "firmware": {"object"}}, "system_vendor")
	check(sv["firmware"].(map[string]any), map[string][]string{"vendor": str, "version": str, "build_date": str}, "firmware")
	check(m["boot"].(map[string]any), map[string][]string{"current_boot_mode": str, "pxe_interface": nstr}, "boot")
}

// TestInventoryGophercloud decodes our JSON with gophercloud's fixed Go types,
// the way Metal3 reads GET /v1/nodes/{id}/inventory.
func TestInventoryGophercloud(t *testing.T) {
	in := sampleInventory()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var gc gcinv.InventoryType
	if err := json.Unmarshal(raw, &gc); err != nil {
		t.Fatalf("gophercloud cannot decode our inventory: %v", err)
	}
	if gc.CPU.Frequency != "2000.000" || gc.CPU.Count != 4 || gc.Memory.PhysicalMb != 8192 ||
		gc.Memory.Total != 8<<30 || gc.BmcAddress != "192.0.2.200" || gc.Hostname != "node-1" {
		t.Errorf("gophercloud scalar fields: %+v", gc)
	}
	if len(gc.Disks) != 2 || gc.Disks[0].Serial != "S3Z5NB0K123456" || gc.Disks[0].Wwn != "0x5002538e4012ab34" ||
		gc.Disks[0].Size != 480103981056 || gc.Disks[0].ByPath != "/dev/disk/by-path/pci-0000:00:17.0-ata-1" ||
		gc.Disks[1].Serial != "" || !gc.Disks[1].Rotational {
		t.Errorf("gophercloud disks: %+v", gc.Disks)
	}
	if len(gc.Interfaces) != 2 || gc.Interfaces[0].SpeedMbps != 1000 || gc.Interfaces[0].PCIAddress != "0000:00:03.0" ||
		gc.Interfaces[0].IPV6Address != "2001:db8::10" || !gc.Interfaces[0].HasCarrier {
		t.Errorf("gophercloud interfaces: %+v", gc.Interfaces)
	}
	if gc.SystemVendor.Firmware.BuildDate != "02/06/2015" || gc.Boot.CurrentBootMode != "uefi" ||
		gc.Boot.PXEInterface != "52:54:00:12:34:56" {
		t.Errorf("gophercloud vendor/boot: %+v %+v", gc.SystemVendor, gc.Boot)
	}

	pd := PluginData{
		AllInterfaces: map[string]PluginInterface{"eth0": {Interface: in.Interfaces[0], PXEEnabled: true}},
		MACs:          []string{"52:54:00:12:34:56"},
		BootInterface: "52:54:00:12:34:56",
		RootDisk:      &in.Disks[0],
		RawLLDP:       map[string][]LLDPTLV{"eth0": in.Interfaces[0].LLDP},
	}
	raw, err = json.Marshal(pd)
	if err != nil {
		t.Fatal(err)
	}
	var gpd gcinv.StandardPluginData
	if err := json.Unmarshal(raw, &gpd); err != nil {
		t.Fatalf("gophercloud cannot decode our plugin_data: %v", err)
	}
	if !gpd.AllInterfaces["eth0"].PXEEnabled || gpd.AllInterfaces["eth0"].MACAddress != "52:54:00:12:34:56" ||
		gpd.RootDisk.Name != "/dev/sda" || len(gpd.RawLLDP["eth0"]) != 2 || gpd.RawLLDP["eth0"][0].Value != "04525400123456" {
		t.Errorf("gophercloud plugin data: %+v", gpd)
	}
}

// TestInventoryRoundTrip checks our types read back what they write, and read
// an IPA-produced inventory (nulls where IPA has None).
func TestInventoryRoundTrip(t *testing.T) {
	in := sampleInventory()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Inventory
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}

	const ipa = `{"bmc_address":"0.0.0.0","bmc_v6address":"::/0","bmc_mac":null,
	"boot":{"current_boot_mode":"bios","pxe_interface":null},
	"cpu":{"architecture":"x86_64","count":2,"flags":["fpu"],"frequency":"2100.084","model_name":"QEMU","socket_count":1},
	"disks":[{"hctl":null,"model":"","name":"/dev/vda","rotational":true,"serial":null,"size":13958643712,"vendor":"0x1af4",
	  "wwn":null,"wwn_vendor_extension":null,"wwn_with_extension":null,"by_path":"/dev/disk/by-path/pci-0000:00:04.0",
	  "logical_sectors":512,"physical_sectors":512,"tran":null}],
	"hostname":"h","interfaces":[{"client_id":null,"has_carrier":true,"ipv4_address":"172.24.42.101","mac_address":"52:54:00:47:20:4d",
	  "name":"eth1","product":"0x0001","vendor":"0x1af4","lldp":[[1,"0411"],[0,""]],"speed_mbps":null,"biosdevname":null}],
	"memory":{"physical_mb":2048,"total":2105864192},
	"system_vendor":{"manufacturer":"Bochs","product_name":"Bochs","serial_number":"Not Specified","firmware":{"version":"1.2.3.4"}}}`
	var got Inventory
	if err := json.Unmarshal([]byte(ipa), &got); err != nil {
		t.Fatalf("decode IPA inventory: %v", err)
	}
	if got.Disks[0].Size != 13958643712 || got.Disks[0].Serial != "" || got.Disks[0].ByPath != "/dev/disk/by-path/pci-0000:00:04.0" ||
		got.Interfaces[0].LLDP[0] != (LLDPTLV{Type: 1, Value: "0411"}) || got.BMCAddress != NoBMCAddress {
		t.Errorf("decoded IPA inventory: %+v", got)
	}
}

func TestLLDPTLVRejectsBadShapes(t *testing.T) {
	for _, bad := range []string{`[1]`, `[1,"a",2]`, `["1","a"]`, `[1,2]`, `{}`} {
		var tlv LLDPTLV
		if err := json.Unmarshal([]byte(bad), &tlv); err == nil {
			t.Errorf("%s: decoded without error: %+v", bad, tlv)
		}
	}
}
