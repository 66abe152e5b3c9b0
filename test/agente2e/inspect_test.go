package agente2e

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// physicalMAC is the MAC of the first NIC backed by a device, as the agent's
// inventory lists them; "" when there is none.
func physicalMAC() string {
	ents, _ := os.ReadDir("/sys/class/net")
	var names []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join("/sys/class/net", e.Name(), "device")); err == nil && e.Name() != "lo" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if i, err := net.InterfaceByName(n); err == nil && len(i.HardwareAddr) == 6 {
			return i.HardwareAddr.String()
		}
	}
	return ""
}

// inventory is spec §4's shape with the JSON types gophercloud decodes into:
// a field of another type fails the decode.
type inventory struct {
	CPU struct {
		ModelName    string   `json:"model_name"`
		Frequency    string   `json:"frequency"`
		Count        int      `json:"count"`
		Architecture string   `json:"architecture"`
		Flags        []string `json:"flags"`
		SocketCount  int      `json:"socket_count"`
	} `json:"cpu"`
	Memory struct {
		Total      int64 `json:"total"`
		PhysicalMB int   `json:"physical_mb"`
	} `json:"memory"`
	Disks []struct {
		Name       string `json:"name"`
		Model      string `json:"model"`
		Size       int64  `json:"size"`
		Rotational bool   `json:"rotational"`
		Serial     string `json:"serial"`
		HCTL       string `json:"hctl"`
	} `json:"disks"`
	Interfaces []struct {
		Name       string `json:"name"`
		MACAddress string `json:"mac_address"`
		IPv4       string `json:"ipv4_address"`
		HasCarrier bool   `json:"has_carrier"`
		LLDP       []any  `json:"lldp"`
		Vendor     string `json:"vendor"`
		SpeedMbps  int    `json:"speed_mbps"`
	} `json:"interfaces"`
	BMCAddress   string `json:"bmc_address"`
	BMCV6Address string `json:"bmc_v6address"`
	SystemVendor struct {
		ProductName  string `json:"product_name"`
		SerialNumber string `json:"serial_number"`
		Manufacturer string `json:"manufacturer"`
		Firmware     struct {
			Vendor    string `json:"vendor"`
			Version   string `json:"version"`
			BuildDate string `json:"build_date"`
		} `json:"firmware"`
	} `json:"system_vendor"`
	Boot struct {
		CurrentBootMode string `json:"current_boot_mode"`
		PXEInterface    string `json:"pxe_interface"`
	} `json:"boot"`
	Hostname string `json:"hostname"`
}

func TestInspection(t *testing.T) {
	needRoot(t)
	t.Parallel()
	k := startKiln(t)
	// The controller finds the node from the MACs in the inventory, so the
	// port is this machine's own NIC (each test has its own controller, so
	// the MAC is unique there). Without a NIC, the callback names the node.
	mac := physicalMAC()
	callback := k.URL + "/v1/continue_inspection"
	if mac == "" {
		mac = randomMAC()
	}
	uuid := k.node(mac, nil)
	if physicalMAC() == "" {
		callback += "?node_uuid=" + uuid
	}
	k.provision(uuid, map[string]any{"target": "manage"})
	k.wait(uuid, 30*time.Second, "manageable")
	k.provision(uuid, map[string]any{"target": "inspect"})
	k.wait(uuid, 30*time.Second, "inspect wait")

	// The machine "boots" the ramdisk: the kernel command line the boot
	// interface would have written is given as flags.
	ag := startAgent(t, k, mac, "", "--inspection-callback-url", callback)
	n := k.wait(uuid, 60*time.Second, "manageable")
	ag.Stop()

	code, body := k.call("GET", "/v1/nodes/"+uuid+"/inventory", nil)
	if code != 200 {
		t.Fatalf("GET inventory: %d %v", code, body)
	}
	raw, _ := json.Marshal(body["inventory"])
	var inv inventory
	if err := json.Unmarshal(raw, &inv); err != nil {
		t.Fatalf("inventory does not have spec §4's types: %v\n%s", err, raw)
	}
	if inv.CPU.Count < 1 || inv.Memory.Total <= 0 || inv.Memory.PhysicalMB <= 0 || inv.CPU.Architecture == "" {
		t.Errorf("cpu/memory missing: %s", raw)
	}
	if inv.Boot.PXEInterface != mac {
		t.Errorf("boot.pxe_interface = %q, want the BOOTIF %s", inv.Boot.PXEInterface, mac)
	}
	if inv.BMCAddress == "" || inv.BMCV6Address == "" || inv.Boot.CurrentBootMode == "" {
		t.Errorf("bmc/boot defaults missing: %s", raw)
	}
	if len(inv.Interfaces) == 0 {
		t.Errorf("no interfaces: %s", raw)
	}
	props, _ := n["properties"].(map[string]any)
	for _, key := range []string{"cpus", "memory_mb", "cpu_arch"} {
		if props[key] == nil {
			t.Errorf("properties.%s not set by inspection: %v", key, props)
		}
	}
	if got := props["cpus"]; got != float64(inv.CPU.Count) {
		t.Errorf("properties.cpus = %v, inventory says %d", got, inv.CPU.Count)
	}
	if n["inspection_finished_at"] == nil {
		t.Errorf("inspection_finished_at not set")
	}
	if dii, _ := n["driver_internal_info"].(map[string]any); dii["agent_secret_token"] != nil || dii["agent_url"] != nil {
		t.Errorf("agent not wiped after inspection: %v", dii)
	}
}
