package conductor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// managementCallTimeout bounds one boot-device call to a BMC; the API
// waits a little longer for the answer.
const managementCallTimeout = 30 * time.Second

// hasManagementRequest reports whether the API recorded a boot-device
// request for n that the conductor has not answered.
func hasManagementRequest(n *proto.Node) bool {
	return n.DriverInternalInfo[proto.InfoManagementRequest] != nil
}

// runManagementRequest carries out the boot-device request the API
// recorded (this runs under the node's reservation) and records the
// answer the API is waiting for, with the BMC check it amounts to.
func (f *flow) runManagementRequest(ctx context.Context) error {
	var req proto.ManagementRequest
	if !proto.FromDict(f.n.DriverInternalInfo, proto.InfoManagementRequest, &req) {
		return f.update(ctx, func(n *proto.Node) { delete(n.DriverInternalInfo, proto.InfoManagementRequest) })
	}
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
	return f.update(ctx, func(n *proto.Node) {
		var cur proto.ManagementRequest
		if proto.FromDict(n.DriverInternalInfo, proto.InfoManagementRequest, &cur) && cur.ID == req.ID {
			delete(n.DriverInternalInfo, proto.InfoManagementRequest)
		}
		n.DriverInternalInfo[proto.InfoManagementResult] = proto.ToDict(res)
		if res.Invalid {
			return // the BMC was not asked, or refused the value: no news of its health
		}
		n.DriverInternalInfo[proto.InfoLastBMCCheck] = check.Dict()
		if req.Op == proto.OpSetBootDevice && err == nil {
			n.DriverInternalInfo[proto.InfoBootDevice] = proto.Dict{"boot_device": req.BootDevice, "persistent": req.Persistent}
		}
	})
}

// failManagementRequest answers a pending boot-device request with msg
// (the node's hardware type cannot be resolved); it runs inside an update.
func failManagementRequest(n *proto.Node, msg string) {
	var req proto.ManagementRequest
	if !proto.FromDict(n.DriverInternalInfo, proto.InfoManagementRequest, &req) {
		return
	}
	delete(n.DriverInternalInfo, proto.InfoManagementRequest)
	n.DriverInternalInfo[proto.InfoManagementResult] = proto.ToDict(proto.ManagementResult{ID: req.ID, Error: msg})
}

// recordBMCCheck records a failed exchange with the BMC as the node's last
// BMC check, for GET …/validate to show (scrubbed of credentials).
func (f *flow) recordBMCCheck(ctx context.Context, operation string, err error) {
	check := proto.BMCCheck{At: time.Now(), Operation: operation, Error: secrets.Scrub(err.Error())}
	if uerr := f.update(ctx, func(n *proto.Node) { n.DriverInternalInfo[proto.InfoLastBMCCheck] = check.Dict() }); uerr != nil {
		f.c.log.Warn("record BMC check", "node", f.n.UUID, "err", uerr)
	}
}
