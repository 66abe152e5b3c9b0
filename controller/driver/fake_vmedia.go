package driver

import (
	"context"
	"slices"
	"sync"

	"github.com/kilnhq/kiln/proto"
)

// fake-hardware's virtual media: a CD/DVD drive, a floppy and a USB stick
// per node, held in memory like its boot device (driver_info
// fake_management_delay/_error apply).

// fakeMediaTypes are the Redfish media types of each device type's drive.
var fakeMediaTypes = map[string][]string{"cdrom": {"CD", "DVD"}, "floppy": {"Floppy"}, "disk": {"USBStick"}}

// fakeDrives is one node's drives: device type → inserted image ("" none).
type fakeDrives struct {
	mu     sync.Mutex
	images map[string]string
}

var fakeMedia sync.Map // node UUID → *fakeDrives

func fakeDrivesOf(n *proto.Node) *fakeDrives {
	d, _ := fakeMedia.LoadOrStore(n.UUID, &fakeDrives{images: map[string]string{}})
	return d.(*fakeDrives)
}

var _ VirtualMediaManager = (*fakeManagement)(nil)

// AttachVirtualMedia implements VirtualMediaManager.
func (*fakeManagement) AttachVirtualMedia(ctx context.Context, n *proto.Node, deviceType, imageURL string) error {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return err
	}
	if _, ok := fakeMediaTypes[deviceType]; !ok {
		return InvalidParameterf("fake BMC: no %s virtual media device", deviceType)
	}
	d := fakeDrivesOf(n)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.images[deviceType] = imageURL
	return nil
}

// DetachVirtualMedia implements VirtualMediaManager.
func (*fakeManagement) DetachVirtualMedia(ctx context.Context, n *proto.Node, deviceTypes []string) error {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return err
	}
	d := fakeDrivesOf(n)
	d.mu.Lock()
	defer d.mu.Unlock()
	for t := range fakeMediaTypes {
		if len(deviceTypes) == 0 || slices.Contains(deviceTypes, t) {
			delete(d.images, t)
		}
	}
	return nil
}

// GetVirtualMedia implements VirtualMediaManager: the three drives, CD first.
func (*fakeManagement) GetVirtualMedia(ctx context.Context, n *proto.Node) ([]proto.VirtualMedia, error) {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return nil, err
	}
	d := fakeDrivesOf(n)
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []proto.VirtualMedia
	for _, t := range []string{"cdrom", "floppy", "disk"} {
		img := d.images[t]
		out = append(out, proto.VirtualMedia{MediaTypes: slices.Clone(fakeMediaTypes[t]), Inserted: img != "", Image: img})
	}
	return out, nil
}
