package driver

import (
	"context"

	"github.com/kilnhq/kiln/proto"
)

// VirtualMediaManager is a management interface that attaches any image as
// a virtual device (Ironic's /v1/nodes/{id}/vmedia): deviceType is one of
// proto.VirtualMediaDeviceTypes. A management interface without it answers
// those requests with 400.
type VirtualMediaManager interface {
	AttachVirtualMedia(ctx context.Context, n *proto.Node, deviceType, imageURL string) error
	// DetachVirtualMedia ejects the devices of deviceTypes, every device
	// when none is given; an empty device is left as it is.
	DetachVirtualMedia(ctx context.Context, n *proto.Node, deviceTypes []string) error
	GetVirtualMedia(ctx context.Context, n *proto.Node) ([]proto.VirtualMedia, error)
}
