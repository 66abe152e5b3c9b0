package decide

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// inventorySummary is the part of an agent inventory the conductor uses.
type inventorySummary struct {
	CPU struct {
		Count        int    `json:"count"`
		Architecture string `json:"architecture"`
	} `json:"cpu"`
	Memory struct {
		PhysicalMB int   `json:"physical_mb"`
		Total      int64 `json:"total"`
	} `json:"memory"`
	Disks []struct {
		Name string `json:"name"`
		Size int64  `json:"size"`
	} `json:"disks"`
	Interfaces []struct {
		Name       string `json:"name"`
		MACAddress string `json:"mac_address"`
	} `json:"interfaces"`
	Boot struct {
		PXEInterface string `json:"pxe_interface"`
	} `json:"boot"`
}

// summarizeInventory derives scheduling properties and the MACs to create
// ports for from an inventory (spec §3.6: cpus, memory_mb, local_gb, cpu_arch).
func summarizeInventory(raw, plugin json.RawMessage) (props proto.Dict, macs []string, pxe string, err error) {
	var inv inventorySummary
	if err := json.Unmarshal(raw, &inv); err != nil {
		return nil, nil, "", fmt.Errorf("decode inventory: %w", err)
	}
	props = proto.Dict{}
	if inv.CPU.Count > 0 {
		props["cpus"] = inv.CPU.Count
	}
	if inv.CPU.Architecture != "" {
		props["cpu_arch"] = inv.CPU.Architecture
	}
	mem := inv.Memory.PhysicalMB
	if mem == 0 && inv.Memory.Total > 0 {
		mem = int(inv.Memory.Total >> 20)
	}
	if mem > 0 {
		props["memory_mb"] = mem
	}
	// local_gb: the smallest disk of at least 4 GiB (the default root disk),
	// less 1 GiB for partitioning, as Ironic computes it.
	var root int64
	for _, d := range inv.Disks {
		if d.Size >= 4<<30 && (root == 0 || d.Size < root) {
			root = d.Size
		}
	}
	if root > 0 {
		props["local_gb"] = root>>30 - 1
	}
	pxe = strings.ToLower(inv.Boot.PXEInterface)
	pxe = strings.TrimPrefix(pxe, "01-")
	pxe = strings.ReplaceAll(pxe, "-", ":")
	for _, i := range inv.Interfaces {
		if hw, err := net.ParseMAC(i.MACAddress); err == nil {
			mac := strings.ToLower(hw.String())
			if pxe == "" || mac == pxe || strings.EqualFold(i.Name, inv.Boot.PXEInterface) {
				macs = append(macs, mac)
				if pxe != "" {
					pxe = mac
				}
			}
		}
	}
	return props, macs, pxe, nil
}
