package conductor

import (
	"context"
	"time"

	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// managementCallTimeout bounds one boot-device call to a BMC; the API
// waits a little longer for the answer.
const managementCallTimeout = 30 * time.Second

// managementCall makes the boot-device call the API recorded (under the
// node's reservation): set the device, or read it back from the BMC.
func (f *flow) managementCall(ctx context.Context, req proto.ManagementRequest) (driver.BootDeviceState, decide.ManagementRead, error) {
	ctx, cancel := context.WithTimeout(ctx, managementCallTimeout)
	defer cancel()
	switch req.Op {
	case proto.OpSetBootDevice:
		return driver.BootDeviceState{}, decide.ManagementRead{}, f.ifs.Management.SetBootDevice(ctx, f.n, req.BootDevice, req.Persistent)
	case proto.OpGetBootDevice:
		r, ok := f.ifs.Management.(driver.BootDeviceReader)
		if !ok {
			return driver.BootDeviceState{}, decide.ManagementRead{}, driver.InvalidParameterf("the %s management interface cannot read the boot device", f.n.ManagementInterface)
		}
		st, err := r.ReadBootDevice(ctx, f.n)
		return st, decide.ManagementRead{}, err
	}
	read, err := f.managementOp(ctx, req) // mgmtops.go
	return driver.BootDeviceState{}, read, err
}
