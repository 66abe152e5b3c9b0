package decide

import (
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// ManagementRead is what a management call read from the BMC besides a
// boot device.
type ManagementRead struct {
	Indicators     []proto.Indicator
	IndicatorState string
	// BootMode ("" unknown) and SecureBoot (nil unknown) are read back
	// after a boot mode or secure boot change.
	BootMode   string
	SecureBoot *bool
}

// managementOperations name a management request's operation as its
// answer and the BMC check tell it.
var managementOperations = map[string]string{
	proto.OpSetBootDevice: "set boot device", proto.OpGetBootDevice: "get boot device",
	proto.OpInjectNMI: "inject NMI", proto.OpGetIndicators: "get indicators",
	proto.OpGetIndicator: "get indicator state", proto.OpSetIndicator: "set indicator state",
	proto.OpSetBootMode: "set boot mode", proto.OpSetSecureBoot: "set secure boot",
	proto.OpAttachVirtualMedia: "attach virtual media", proto.OpDetachVirtualMedia: "detach virtual media",
	proto.OpGetVirtualMedia: "get virtual media",
}

func managementOperation(op string) string {
	if name, ok := managementOperations[op]; ok {
		return name
	}
	return op
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
	} else {
		switch req.Op {
		case proto.OpSetBootDevice:
			dev, persistent := req.BootDevice, req.Persistent
			res.BootDevice, res.Persistent = &dev, &persistent
		case proto.OpGetBootDevice:
			persistent := ev.Device.Persistent
			res.Persistent = &persistent
			if dev := ev.Device.Device; dev != "" {
				res.BootDevice = &dev
			}
		case proto.OpGetIndicators:
			res.Indicators = ev.Read.Indicators
		case proto.OpGetIndicator:
			res.IndicatorState = ev.Read.IndicatorState
		case proto.OpGetVirtualMedia:
			res.VirtualMedia = ev.Media
			if res.VirtualMedia == nil {
				res.VirtualMedia = []proto.VirtualMedia{}
			}
		}
	}
	var node func(n *proto.Node)
	if proto.AsyncManagementOp(req.Op) {
		// Nobody waits for this answer: it lands on the node, as Ironic's
		// asynchronous boot mode and secure boot changes do.
		node = func(n *proto.Node) {
			if res.Error != "" {
				msg := res.Error
				n.LastError = &msg
				return
			}
			n.LastError = nil
			if m := ev.Read.BootMode; m != "" {
				n.BootMode = &m
			}
			if sb := ev.Read.SecureBoot; sb != nil {
				on := *sb
				n.SecureBoot = &on
			}
		}
	}
	return []Action{Update{Node: node, Flow: func(s *flowstate.State) {
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
