package conductor

import (
	"context"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// virtualMediaCall makes the virtual media call the API recorded (under
// the node's reservation, as boot-device calls are); ok is false for any
// other request. A management interface without virtual media refuses it.
func (f *flow) virtualMediaCall(ctx context.Context, req proto.ManagementRequest) (media []proto.VirtualMedia, ok bool, err error) {
	switch req.Op {
	case proto.OpAttachVirtualMedia, proto.OpDetachVirtualMedia, proto.OpGetVirtualMedia:
	default:
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, managementCallTimeout)
	defer cancel()
	vm, can := f.ifs.Management.(driver.VirtualMediaManager)
	if !can {
		return nil, true, driver.InvalidParameterf("the %s management interface of node %s does not support virtual media", f.n.ManagementInterface, f.n.UUID)
	}
	switch req.Op {
	case proto.OpAttachVirtualMedia:
		if req.VirtualMedia == nil {
			return nil, true, driver.InvalidParameterf("no virtual media to attach")
		}
		return nil, true, vm.AttachVirtualMedia(ctx, f.n, req.VirtualMedia.DeviceType, req.VirtualMedia.ImageURL)
	case proto.OpDetachVirtualMedia:
		return nil, true, vm.DetachVirtualMedia(ctx, f.n, req.DeviceTypes)
	}
	media, err = vm.GetVirtualMedia(ctx, f.n)
	return media, true, err
}
