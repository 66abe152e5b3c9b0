package proto

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Inventory is the hardware inventory an agent reports, shaped exactly like
// ironic-python-agent's list_hardware_info so that Ironic, gophercloud and Metal3
// read ours without knowing who produced it. Field types matter as much as names:
// gophercloud decodes them into fixed Go types.
type Inventory struct {
	CPU        CPU         `json:"cpu"`
	Memory     Memory      `json:"memory"`
	Disks      []Disk      `json:"disks"`
	Interfaces []Interface `json:"interfaces"`
	// BMCAddress is the BMC's IPv4 address, "0.0.0.0" when there is none.
	BMCAddress string `json:"bmc_address"`
	// BMCV6Address is the BMC's IPv6 address, "::/0" when there is none.
	BMCV6Address string `json:"bmc_v6address"`
	// BMCMAC is the BMC's MAC address, null when unknown.
	BMCMAC       NullString   `json:"bmc_mac"`
	SystemVendor SystemVendor `json:"system_vendor"`
	Boot         Boot         `json:"boot"`
	Hostname     string       `json:"hostname"`
}

// Defaults IPA reports when a machine has no (reachable) BMC.
const (
	NoBMCAddress   = "0.0.0.0"
	NoBMCV6Address = "::/0"
)

// Boot modes for Boot.CurrentBootMode.
const (
	BootModeUEFI = "uefi"
	BootModeBIOS = "bios"
)

// CPU describes the processors. Frequency is a string of MHz ("2100.084"), as IPA
// sends it; Count counts logical CPUs.
type CPU struct {
	ModelName    string   `json:"model_name"`
	Frequency    string   `json:"frequency"`
	Count        int      `json:"count"`
	Architecture string   `json:"architecture"`
	Flags        []string `json:"flags"`
	SocketCount  int      `json:"socket_count"`
}

// Memory holds the usable memory in bytes (Total, what the kernel sees) and the
// installed memory in MiB (PhysicalMB).
type Memory struct {
	Total      int64 `json:"total"`
	PhysicalMB int64 `json:"physical_mb"`
}

// Disk is one block device that can hold an operating system. Root-device hints
// are matched against these fields. Unknown string values are JSON null, as in IPA.
type Disk struct {
	// Name is the device path, "/dev/sda".
	Name  string     `json:"name"`
	Model NullString `json:"model"`
	// Size in bytes.
	Size               int64      `json:"size"`
	Rotational         bool       `json:"rotational"`
	WWN                NullString `json:"wwn"`
	Serial             NullString `json:"serial"`
	Vendor             NullString `json:"vendor"`
	WWNWithExtension   NullString `json:"wwn_with_extension"`
	WWNVendorExtension NullString `json:"wwn_vendor_extension"`
	// HCTL is the SCSI address "host:channel:target:lun", null for non-SCSI disks.
	HCTL NullString `json:"hctl"`
	// ByPath is the udev-style "/dev/disk/by-path/…" link name.
	ByPath NullString `json:"by_path"`
	// LogicalSectors and PhysicalSectors are the sector sizes in bytes.
	LogicalSectors  int `json:"logical_sectors"`
	PhysicalSectors int `json:"physical_sectors"`
	// Tran is the transport as lsblk names it: sata, sas, nvme, usb, virtio…
	Tran NullString `json:"tran"`
}

// Interface is one physical network interface.
type Interface struct {
	Name        string     `json:"name"`
	MACAddress  string     `json:"mac_address"`
	IPv4Address NullString `json:"ipv4_address"`
	IPv6Address NullString `json:"ipv6_address"`
	HasCarrier  bool       `json:"has_carrier"`
	// LLDP holds the raw TLVs received on the interface; nil (JSON null) when
	// LLDP was not collected.
	LLDP []LLDPTLV `json:"lldp"`
	// Vendor and Product are PCI IDs as "0x8086".
	Vendor   NullString `json:"vendor"`
	Product  NullString `json:"product"`
	ClientID NullString `json:"client_id"`
	// BIOSDevName is the name biosdevname would give; "" when unknown.
	BIOSDevName string `json:"biosdevname"`
	// SpeedMbps is the link speed; 0 when unknown or down.
	SpeedMbps  int        `json:"speed_mbps"`
	PCIAddress NullString `json:"pci_address"`
	Driver     NullString `json:"driver"`
}

// SystemVendor identifies the machine, from DMI.
type SystemVendor struct {
	ProductName  string   `json:"product_name"`
	SerialNumber string   `json:"serial_number"`
	Manufacturer string   `json:"manufacturer"`
	Firmware     Firmware `json:"firmware"`
}

// Firmware is the system firmware (BIOS/UEFI) identity.
type Firmware struct {
	Vendor    string `json:"vendor"`
	Version   string `json:"version"`
	BuildDate string `json:"build_date"`
}

// Boot says how the agent's ramdisk was booted.
type Boot struct {
	// CurrentBootMode is BootModeUEFI or BootModeBIOS.
	CurrentBootMode string `json:"current_boot_mode"`
	// PXEInterface is the MAC address the machine network-booted from (BOOTIF).
	PXEInterface NullString `json:"pxe_interface"`
}

// LLDPTLV is one LLDP TLV: its type and its value as lower-case hex. On the wire
// it is a two-element array, [type, "hex"].
type LLDPTLV struct {
	Type  int
	Value string
}

// MarshalJSON writes the TLV as [type, "hex"].
func (t LLDPTLV) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{t.Type, t.Value})
}

// UnmarshalJSON reads [type, "hex"].
func (t *LLDPTLV) UnmarshalJSON(data []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(data, &pair); err != nil {
		return fmt.Errorf("decode LLDP TLV: %w", err)
	}
	if len(pair) != 2 {
		return fmt.Errorf("decode LLDP TLV: want [type, value], got %d elements", len(pair))
	}
	if err := json.Unmarshal(pair[0], &t.Type); err != nil {
		return fmt.Errorf("decode LLDP TLV type: %w", err)
	}
	if err := json.Unmarshal(pair[1], &t.Value); err != nil {
		return fmt.Errorf("decode LLDP TLV value: %w", err)
	}
	return nil
}

// NullString is a string that is JSON null when empty, the way IPA reports
// values it could not find (a disk without a WWN, an interface without an
// address). It decodes null and strings alike.
type NullString string

// MarshalJSON writes null for "" and a JSON string otherwise.
func (s NullString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// UnmarshalJSON accepts null (as "") or a string.
func (s *NullString) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*s = ""
		return nil
	}
	var v string
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*s = NullString(v)
	return nil
}

// PluginData is what the controller keeps beside an inventory after inspection
// (GET /v1/nodes/{id}/inventory returns {"inventory", "plugin_data"}). Only the
// keys Kiln produces or Metal3 reads are typed here.
type PluginData struct {
	// AllInterfaces maps every reported interface name to its inventory entry
	// plus whether it is the PXE (BOOTIF) interface.
	AllInterfaces map[string]PluginInterface `json:"all_interfaces,omitempty"`
	// ValidInterfaces are the interfaces that pass the controller's checks.
	ValidInterfaces map[string]PluginInterface `json:"valid_interfaces,omitempty"`
	// MACs lists the MAC addresses of ValidInterfaces.
	MACs []string `json:"macs,omitempty"`
	// BootInterface is the BOOTIF MAC address.
	BootInterface string `json:"boot_interface,omitempty"`
	// RootDisk is the disk the root-device hints selected.
	RootDisk *Disk `json:"root_disk,omitempty"`
	// RawLLDP is each interface's LLDP TLVs; ParsedLLDP their decoded form
	// (switch_chassis_id, switch_port_id, …).
	RawLLDP    map[string][]LLDPTLV      `json:"lldp_raw,omitempty"`
	ParsedLLDP map[string]map[string]any `json:"parsed_lldp,omitempty"`
	// Error is the agent's inspection error, if any.
	Error string `json:"error,omitempty"`
}

// PluginInterface is an interface as kept in PluginData.AllInterfaces.
type PluginInterface struct {
	Interface
	PXEEnabled bool `json:"pxe_enabled"`
}
