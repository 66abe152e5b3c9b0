// Package netboot decides, from the store, what a network-booting machine
// boots: the agent ramdisk while its node deploys, cleans or inspects, its
// local disk otherwise. It is the controller's implementation of
// boot.Backend.
package netboot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/controller/boot"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Backend answers boot.Backend over a store.
type Backend struct {
	Store store.Store
	// FilesURL is where relative deploy_kernel/deploy_ramdisk names are
	// served from (…/boot/files).
	FilesURL string
	// RamdiskURL is where per-node ramdisks with network data baked in are
	// served (…/boot/ramdisk); nodes with network data boot from
	// RamdiskURL/<uuid> unless driver_info names a deploy_ramdisk.
	RamdiskURL string
	// PerNodeRamdisk sends every known node to RamdiskURL/<uuid>, with or
	// without network data: set when those ramdisks carry the controller's
	// CA for the agent.
	PerNodeRamdisk bool
}

var (
	_ boot.Backend            = (*Backend)(nil)
	_ boot.NetworkDataBackend = (*Backend)(nil)
)

// NetworkData implements boot.NetworkDataBackend: the NMState document a
// static-IP host needs before it can reach the controller, from
// driver_info.preprovisioning_network_data (Metal3's name) or an
// NMState-shaped network_data.
func (b *Backend) NetworkData(ctx context.Context, node string) ([]byte, error) {
	n, err := b.Store.GetNode(ctx, node)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%s: %w", node, boot.ErrUnknownNode)
	}
	if err != nil {
		return nil, err
	}
	return driver.NetworkData(n)
}

// BootFor implements boot.Backend.
func (b *Backend) BootFor(ctx context.Context, mac string) (boot.Decision, error) {
	p, err := b.Store.GetPortByAddress(ctx, mac)
	if errors.Is(err, store.ErrNotFound) {
		return boot.Decision{}, fmt.Errorf("%s: %w", mac, boot.ErrUnknownMAC)
	}
	if err != nil {
		return boot.Decision{}, err
	}
	n, err := b.Store.GetNode(ctx, p.NodeUUID)
	if err != nil {
		return boot.Decision{}, fmt.Errorf("node of port %s: %w", mac, err)
	}
	return b.decide(n), nil
}

// decide is the pure part: the agent boots where the agent is expected
// (the lookup states), everything else boots its disk.
func (b *Backend) decide(n *proto.Node) boot.Decision {
	if !state.LookupAllowed(n.ProvisionState, false) || n.Maintenance && n.ProvisionState == proto.StateActive {
		return boot.Decision{Action: boot.BootLocal, NodeUUID: n.UUID}
	}
	d := boot.Decision{Action: boot.BootAgent, NodeUUID: n.UUID,
		KernelURL: b.fileURL(n.DriverInfo["deploy_kernel"]), RamdiskURL: b.fileURL(n.DriverInfo["deploy_ramdisk"])}
	if data, _ := driver.NetworkData(n); (len(data) > 0 || b.PerNodeRamdisk) && d.RamdiskURL == "" && b.RamdiskURL != "" {
		d.RamdiskURL = strings.TrimSuffix(b.RamdiskURL, "/") + "/" + n.UUID
	}
	d.Inspect = n.ProvisionState == proto.StateInspectWait || n.ProvisionState == proto.StateInspecting
	if extra, ok := n.DriverInfo["kernel_append_params"].(string); ok && extra != "" {
		d.ExtraKernelArgs = strings.Fields(extra)
	}
	return d
}

// fileURL resolves driver_info's deploy_kernel/deploy_ramdisk: URLs as they
// are, bare names under FilesURL; "" means the handler's default.
func (b *Backend) fileURL(v any) string {
	s, _ := v.(string)
	switch {
	case s == "":
		return ""
	case strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://"):
		return s
	case b.FilesURL != "" && !strings.Contains(s, "/") && !strings.Contains(s, ".."):
		return strings.TrimSuffix(b.FilesURL, "/") + "/" + s
	}
	return ""
}
