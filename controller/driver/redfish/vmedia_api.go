package redfish

import (
	"context"
	"fmt"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// The redfish management interface attaches any image on request
// (/v1/nodes/{id}/vmedia), on the devices the virtual-media boot uses.

// deviceMediaTypes are the Redfish media types of each of Ironic's device
// types (Ironic's VMEDIA_DEVICES_MAP).
var deviceMediaTypes = map[string][]schemas.VirtualMediaType{
	"cdrom":  {schemas.CDVirtualMediaType, schemas.DVDVirtualMediaType},
	"floppy": {schemas.FloppyVirtualMediaType},
	"disk":   {schemas.USBStickVirtualMediaType},
}

var _ driver.VirtualMediaManager = (*Management)(nil)

// deviceOf finds the node's device for deviceType: none is a refused
// request (400), not a BMC failure.
func (s *session) deviceOf(deviceType string) (*schemas.VirtualMedia, error) {
	types, ok := deviceMediaTypes[deviceType]
	if !ok {
		return nil, driver.InvalidParameterf("unknown virtual media device type %q", deviceType)
	}
	vm, err := s.virtualMediaOf(types...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", driver.ErrInvalidParameter, err)
	}
	return vm, nil
}

// AttachVirtualMedia inserts imageURL into the node's deviceType drive
// (ejecting what it held) and checks the BMC reports it.
func (m *Management) AttachVirtualMedia(ctx context.Context, n *proto.Node, deviceType, imageURL string) error {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	vm, err := s.deviceOf(deviceType)
	if err != nil {
		return err
	}
	return s.insertInto(vm, imageURL)
}

// DetachVirtualMedia ejects the drives of deviceTypes, every drive of the
// system when none is given.
func (m *Management) DetachVirtualMedia(ctx context.Context, n *proto.Node, deviceTypes []string) error {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	if len(deviceTypes) == 0 {
		vms, _, err := s.allVirtualMedia()
		if err != nil {
			return err
		}
		for _, vm := range vms {
			if err := s.ejectFrom(vm); err != nil {
				return err
			}
		}
		return nil
	}
	for _, t := range deviceTypes {
		vm, err := s.deviceOf(t)
		if err != nil {
			return err
		}
		if err := s.ejectFrom(vm); err != nil {
			return err
		}
	}
	return nil
}

// GetVirtualMedia lists the system's virtual media devices as the BMC
// reports them.
func (m *Management) GetVirtualMedia(ctx context.Context, n *proto.Node) ([]proto.VirtualMedia, error) {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return nil, err
	}
	vms, _, err := s.allVirtualMedia()
	if err != nil {
		return nil, err
	}
	out := make([]proto.VirtualMedia, 0, len(vms))
	for _, vm := range vms {
		v := proto.VirtualMedia{MediaTypes: []string{}, Image: vm.Image, Inserted: vm.Inserted != nil && *vm.Inserted}
		for _, t := range vm.MediaTypes {
			v.MediaTypes = append(v.MediaTypes, string(t))
		}
		out = append(out, v)
	}
	return out, nil
}
