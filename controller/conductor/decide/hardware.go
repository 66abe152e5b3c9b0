package decide

import (
	"fmt"
	"slices"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Hardware configuration in the flows: the out-of-band steps of the bios,
// raid, firmware and management interfaces (Input.DriverSteps), and UEFI
// Secure Boot for nodes whose capabilities ask for it.

// secureBoot turns secure boot on (before an instance boots) or off
// (before cleaning) for a node whose capabilities ask for it
// (secure_boot:true), as Ironic's redfish boot interface does; nothing for
// the others.
func secureBoot(in Input, on bool, onErr OnError) []Action {
	if !driver.WantsSecureBoot(in.Node) {
		return nil
	}
	return []Action{SetSecureBoot{On: on, OnError: onErr}}
}

// hasDriverStep: one of steps is an out-of-band step of the node.
func hasDriverStep(in Input, steps []proto.StepCall) bool {
	return slices.ContainsFunc(steps, func(s proto.StepCall) bool { return isDriverStep(in, s) })
}

// hasHardwareCache: the node has a bios or firmware interface, whose
// settings or components the API serves from a cache.
func hasHardwareCache(in Input) bool {
	return slices.ContainsFunc(in.DriverSteps, func(s proto.Step) bool { return s.Interface == "bios" || s.Interface == "firmware" })
}

// outOfBand plans and runs a manual clean or a service made of out-of-band
// steps on a node whose deploy interface has no agent (fake, ramdisk): the
// conductor runs them without booting one, as Ironic does when no step
// needs the ramdisk. A step no interface offers fails the flow.
func outOfBand(in Input, kind proto.StepKind, requested []proto.StepCall) []Action {
	plan, err := buildCleanSteps(in.DriverSteps, requested, true)
	if err != nil {
		return fail(in, fmt.Sprintf("Node %s: %v", in.Node.UUID, err))
	}
	record := func(s *flowstate.State) {
		s.ResetPlan()
		s.Steps = plan
		// Planned: a restart resumes the plan rather than the request.
		s.Request = nil
	}
	next := in
	record(&next.State)
	return append([]Action{Update{Flow: record}}, runSteps(next, kind, time.Time{})...)
}
