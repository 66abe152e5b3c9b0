package conductor

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/configdrive"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// recover clears what a crash of this conductor left behind: reservations in
// its own name (a restart is faster than the dead-conductor timeout) and those
// of dead conductors. Interrupted flows are then resumed or failed by the
// first scan (see act).
func (c *Conductor) recover(ctx context.Context) {
	if released, err := c.st.ReleaseDead(ctx); err != nil {
		c.log.Warn("release reservations of dead conductors", "err", err)
	} else if len(released) > 0 {
		c.log.Warn("released reservations of dead conductors", "nodes", len(released))
	}
	nodes, err := c.st.ListNodes(ctx, store.NodeQuery{})
	if err != nil {
		c.log.Warn("list nodes for recovery", "err", err)
		return
	}
	for _, n := range nodes {
		if n.Reservation != nil && *n.Reservation == c.cfg.Name {
			if err := c.st.Release(ctx, n.UUID, c.cfg.Name); err != nil {
				c.log.Warn("release own reservation", "node", n.UUID, "err", err)
				continue
			}
			c.log.Warn("released a reservation left by this conductor's previous run", "node", n.UUID, "state", n.ProvisionState)
		}
	}
	c.scan(ctx)
}

// configDriveFor returns the config drive for write_image: a string as the
// client gave it (a gzip+base64 ISO or a URL), or a dict rendered to an ISO.
func configDriveFor(n *proto.Node) (string, error) {
	switch cd := n.InstanceInfo["configdrive"].(type) {
	case nil:
		return "", nil
	case string:
		return cd, nil
	case map[string]any:
		d, err := configdrive.FromDict(cd)
		if err != nil {
			return "", err
		}
		name := ""
		if n.Name != nil {
			name = *n.Name
		}
		iso, err := d.ISO(n.UUID, name)
		if err != nil {
			return "", err
		}
		return configdrive.Encode(iso)
	default:
		return "", fmt.Errorf("instance_info.configdrive must be a string or an object, not %T", cd)
	}
}

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

// createPorts adds a port for each MAC the node does not have yet (Ironic's
// "add ports: pxe" inspection hook); pxe marks the PXE-enabled one.
func (f *flow) createPorts(ctx context.Context, macs []string, pxe string) error {
	for _, mac := range macs {
		if existing, err := f.c.st.GetPortByAddress(ctx, mac); err == nil {
			if existing.NodeUUID != f.n.UUID {
				f.history(ctx, "WARNING", fmt.Sprintf("MAC %s found by inspection belongs to node %s; no port created", mac, existing.NodeUUID))
			}
			continue
		}
		p := &proto.Port{
			UUID: uuid.NewString(), Address: mac, NodeUUID: f.n.UUID, PXEEnabled: pxe == "" || mac == pxe,
			Extra: proto.Dict{}, InternalInfo: proto.Dict{}, LocalLinkConnection: proto.Dict{}, CreatedAt: proto.Now(),
		}
		if err := f.c.st.CreatePort(ctx, p); err != nil {
			return fmt.Errorf("Inspection of node %s: creating a port for %s: %v", f.n.UUID, mac, err)
		}
	}
	return nil
}
