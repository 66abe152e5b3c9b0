package conductor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// managementCallTimeout bounds one boot-device call to a BMC; the API
// waits a little longer for the answer.
const managementCallTimeout = 30 * time.Second

// runManagementRequest carries out the boot-device request the API
// recorded (this runs under the node's reservation) and records the
// answer the API is waiting for, with the BMC check it amounts to.
func (f *flow) runManagementRequest(ctx context.Context) error {
	fs, _ := flowstate.Of(f.n)
	if fs.ManagementRequest == nil {
		return nil
	}
	req := *fs.ManagementRequest
	res := proto.ManagementResult{ID: req.ID}
	cctx, cancel := context.WithTimeout(ctx, managementCallTimeout)
	defer cancel()
	var err error
	operation := "get boot device"
	switch req.Op {
	case proto.OpSetBootDevice:
		operation = "set boot device"
		err = f.ifs.Management.SetBootDevice(cctx, f.n, req.BootDevice, req.Persistent)
		if err == nil {
			res.BootDevice, res.Persistent = &req.BootDevice, &req.Persistent
		}
	case proto.OpGetBootDevice:
		r, ok := f.ifs.Management.(driver.BootDeviceReader)
		if !ok {
			err = driver.InvalidParameterf("the %s management interface cannot read the boot device", f.n.ManagementInterface)
			break
		}
		var st driver.BootDeviceState
		if st, err = r.ReadBootDevice(cctx, f.n); err == nil {
			res.Persistent = &st.Persistent
			if st.Device != "" {
				res.BootDevice = &st.Device
			}
		}
	default:
		err = driver.InvalidParameterf("unknown management operation %q", req.Op)
	}
	if ctx.Err() != nil {
		return ctx.Err() // stopping: the request stays for whoever runs next
	}
	check := proto.BMCCheck{At: time.Now(), Operation: operation}
	if err != nil {
		res.Error = secrets.Scrub(fmt.Sprintf("Failed to %s for node %s: %v", operation, f.n.UUID, err))
		res.Invalid = errors.Is(err, driver.ErrInvalidParameter)
		if !res.Invalid {
			check.Error = secrets.Scrub(err.Error())
		}
		f.c.log.Warn("boot device request failed", "node", f.n.UUID, "op", req.Op, "err", err)
	}
	return f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) {
		if s.ManagementRequest != nil && s.ManagementRequest.ID == req.ID {
			s.ManagementRequest = nil
		}
		s.ManagementResult = &res
		if res.Invalid {
			return // the BMC was not asked, or refused the value: no news of its health
		}
		s.LastBMCCheck = &check
		if req.Op == proto.OpSetBootDevice && err == nil {
			s.BootDevice = &flowstate.BootDevice{Device: req.BootDevice, Persistent: req.Persistent}
		}
	})
}
