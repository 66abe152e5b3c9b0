// Package ipxeboot is the "ipxe" boot interface: the machine network-boots
// and controller/boot serves it the agent's iPXE script while the node
// deploys, cleans or inspects. The interface itself only steers the boot
// device through the node's management interface: PXE once for the ramdisk,
// disk persistently for the instance.
package ipxeboot

import (
	"context"
	"fmt"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// Name is the boot interface name nodes give in boot_interface.
const Name = "ipxe"

// Boot implements driver.Boot for iPXE network boot.
type Boot struct{}

func init() { driver.RegisterBoot(Name, Boot{}) }

func management(n *proto.Node) (driver.Management, error) {
	set, err := driver.Resolve(n)
	if err != nil {
		return nil, fmt.Errorf("ipxe boot: %w", err)
	}
	if set.Management == nil {
		return nil, fmt.Errorf("ipxe boot: node %s has no management interface to set the boot device", n.UUID)
	}
	return set.Management, nil
}

// Validate checks that the node's management interface can steer the boot
// and that its network data, if any, is a document the agent can apply.
func (Boot) Validate(ctx context.Context, n *proto.Node) error {
	if _, err := driver.NetworkData(n); err != nil {
		return err
	}
	m, err := management(n)
	if err != nil {
		return err
	}
	return m.Validate(ctx, n)
}

// CheckConfig implements driver.ConfigChecker: the network data, and the
// management interface's own offline check.
func (Boot) CheckConfig(n *proto.Node) error {
	if _, err := driver.NetworkData(n); err != nil {
		return err
	}
	m, err := management(n)
	if err != nil {
		return err
	}
	return driver.CheckConfig(m, n)
}

// PrepareRamdisk makes the next boot a network boot (once): the served
// iPXE script then loads the agent.
func (Boot) PrepareRamdisk(ctx context.Context, n *proto.Node, _ driver.RamdiskParams) error {
	m, err := management(n)
	if err != nil {
		return err
	}
	if err := m.SetBootDevice(ctx, n, "pxe", false); err != nil {
		return fmt.Errorf("ipxe boot: set boot device pxe once: %w", err)
	}
	return nil
}

// CleanUpRamdisk has nothing to undo: the script is only served while the
// node's state asks for the agent.
func (Boot) CleanUpRamdisk(context.Context, *proto.Node) error { return nil }

// PrepareInstance makes the disk the persistent boot device.
func (Boot) PrepareInstance(ctx context.Context, n *proto.Node) error {
	m, err := management(n)
	if err != nil {
		return err
	}
	if err := m.SetBootDevice(ctx, n, "disk", true); err != nil {
		return fmt.Errorf("ipxe boot: set boot device disk persistent: %w", err)
	}
	return nil
}
