package decide

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// managementOperation names a boot-device request's operation as its
// answer and the BMC check tell it.
func managementOperation(op string) string {
	switch op {
	case proto.OpSetBootDevice:
		return "set boot device"
	case proto.OpAttachVirtualMedia, proto.OpDetachVirtualMedia, proto.OpGetVirtualMedia:
		return strings.ReplaceAll(op, "_", " ")
	}
	return "get boot device"
}

// managementAnswered records the answer the API client waits for, and the
// BMC check it amounts to: a device the BMC refused (or a request it was
// not asked) says nothing of the BMC's health.
func managementAnswered(in Input, ev ManagementAnswered) []Action {
	req := ev.Request
	res := proto.ManagementResult{ID: req.ID}
	operation := managementOperation(req.Op)
	check := proto.BMCCheck{At: in.Now, Operation: operation}
	if ev.Err != nil {
		res.Error = secrets.Scrub(fmt.Sprintf("Failed to %s for node %s: %v", operation, in.Node.UUID, ev.Err))
		res.Invalid = errors.Is(ev.Err, driver.ErrInvalidParameter)
		check.Error = secrets.Scrub(ev.Err.Error())
	} else if req.Op == proto.OpGetVirtualMedia {
		res.VirtualMedia = ev.Media
		if res.VirtualMedia == nil {
			res.VirtualMedia = []proto.VirtualMedia{}
		}
	} else if isVirtualMedia(req.Op) {
		// Attached or detached: nothing to read back.
	} else if req.Op == proto.OpSetBootDevice {
		dev, persistent := req.BootDevice, req.Persistent
		res.BootDevice, res.Persistent = &dev, &persistent
	} else {
		persistent := ev.Device.Persistent
		res.Persistent = &persistent
		if dev := ev.Device.Device; dev != "" {
			res.BootDevice = &dev
		}
	}
	return []Action{Update{Flow: func(s *flowstate.State) {
		if s.ManagementRequest != nil && s.ManagementRequest.ID == req.ID {
			s.ManagementRequest = nil
		}
		s.ManagementResult = &res
		if res.Invalid {
			return
		}
		s.LastBMCCheck = &check
		if req.Op == proto.OpSetBootDevice && ev.Err == nil {
			s.BootDevice = &flowstate.BootDevice{Device: req.BootDevice, Persistent: req.Persistent}
		}
	}}}
}

func isVirtualMedia(op string) bool {
	return op == proto.OpAttachVirtualMedia || op == proto.OpDetachVirtualMedia || op == proto.OpGetVirtualMedia
}
