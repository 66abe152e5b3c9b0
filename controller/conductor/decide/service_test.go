package decide

import (
	"testing"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Service: active → servicing → service wait → active, running the
// operator's service_steps in the agent, then booting the instance again.

var firmwareStep = proto.StepCall{Step: proto.Step{Step: "update_firmware", Interface: "deploy"}}

func TestServiceNeedsServiceSteps(t *testing.T) {
	n, s := requested(t, proto.StateActive, proto.NoState, proto.VerbService)
	in := input(t, n, s, "direct")
	got, _ := after(t, in, Step(in, Classify(in)))
	wantState(t, got, proto.StateServiceFailed, "servicing needs service_steps")
}

func TestServiceBootsTheAgentWithTheStepsRecorded(t *testing.T) {
	n, s := requested(t, proto.StateActive, proto.NoState, proto.VerbService)
	s.Request.ServiceSteps = []proto.StepCall{firmwareStep}
	in := input(t, n, s, "direct")
	acts := Step(in, OperatorRequest{Request: *s.Request})
	want(t, acts, "prepare ramdisk", "rebooting", "move wait")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateServiceWait, "")
	if len(fs.ServiceSteps) != 1 {
		t.Errorf("service steps %v", fs.ServiceSteps)
	}
	in = input(t, got, withAgent(fs), "direct")
	offered := proto.StepsResult{Steps: map[string][]proto.Step{"Vendor": {{Step: "update_firmware", Interface: "deploy"}}}}
	want(t, Step(in, AgentStepsListed{Kind: proto.StepService, Result: offered}), "agent execute deploy.update_firmware")
}

func TestServiceEndsByBootingTheInstance(t *testing.T) {
	n := node(proto.StateServiceWait, proto.StateActive)
	s := withAgent(flowstate.State{Steps: []proto.StepCall{firmwareStep}, StepSent: true, ServiceSteps: []proto.StepCall{firmwareStep}})
	in := input(t, n, s, "direct")
	acts := Step(in, AgentCommandsRead{Kind: proto.StepService, Commands: succeeded(proto.StepService, firmwareStep)})
	want(t, acts, "agent power off", "power off", "clean up ramdisk", "prepare instance", "power on", "move resume", "move done")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateActive, "")
	if fs.ServiceSteps != nil || len(got.ServiceStep) != 0 {
		t.Errorf("service steps %v service_step %v: want both cleared", fs.ServiceSteps, got.ServiceStep)
	}
	got, _ = after(t, in, Step(in, failedAt[PrepareInstance](t, acts, "no disk")))
	wantState(t, got, proto.StateServiceFailed, "Failed to boot node "+nodeID+" back into its instance after servicing: no disk")
}
