// Package inspection turns an agent's inventory into what a node gets from
// it: scheduling properties and ports. The conductor uses it when an
// inspection finishes and the API when discovery enrolls a new machine, so
// both derive the same values.
package inspection

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// Summary is what a node takes from its inventory.
type Summary struct {
	Properties proto.Dict
	// MACs are the interfaces to create ports for: the PXE interface when
	// the agent names one, else every interface with a valid MAC.
	MACs []string
	// PXE is the PXE interface's MAC ("" when the agent named none).
	PXE string
}

// inventory is the part of an agent inventory a summary reads.
type inventory struct {
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

// Summarize derives what Ironic's default inspection hooks take from an
// inventory: the scheduling properties (cpus, memory_mb, local_gb,
// cpu_arch) and the MACs to create ports for, the PXE one marked.
func Summarize(raw json.RawMessage) (Summary, error) {
	var inv inventory
	if err := json.Unmarshal(raw, &inv); err != nil {
		return Summary{}, fmt.Errorf("decode inventory: %w", err)
	}
	props := proto.Dict{}
	var macs []string
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
	pxe := strings.ToLower(inv.Boot.PXEInterface)
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
	return Summary{Properties: props, MACs: macs, PXE: pxe}, nil
}
