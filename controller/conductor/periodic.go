package conductor

import (
	"context"
	"fmt"

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
			UUID: uuid.NewString(), Address: mac, NodeUUID: f.n.UUID, PXEEnabled: pxe == "" || mac == pxe, AvailableForDynamicPortgroup: true,
			Extra: proto.Dict{}, InternalInfo: proto.Dict{}, LocalLinkConnection: proto.Dict{}, CreatedAt: proto.Now(),
		}
		if err := f.c.st.CreatePort(ctx, p); err != nil {
			return fmt.Errorf("Inspection of node %s: creating a port for %s: %v", f.n.UUID, mac, err)
		}
	}
	return nil
}
