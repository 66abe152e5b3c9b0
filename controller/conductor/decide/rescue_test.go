package decide

import (
	"testing"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Rescue: active → rescuing → rescue wait → rescue (the agent gets the
// rescue password), and unrescue back to active.

func rescuable(t *testing.T, password string) (*proto.Node, flowstate.State) {
	n, s := requested(t, proto.StateActive, proto.NoState, proto.VerbRescue)
	if password != "" {
		n.InstanceInfo["rescue_password"] = password
	}
	return n, s
}

func TestRescueBootsTheAgent(t *testing.T) {
	n, s := rescuable(t, "s3cret")
	in := input(t, n, s, "direct")
	acts := Step(in, Classify(in))
	want(t, acts, "prepare ramdisk", "rebooting", "move wait")
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateRescueWait, "")
}

func TestRescueWithoutAPasswordFails(t *testing.T) {
	n, s := rescuable(t, "")
	in := input(t, n, s, "direct")
	got, _ := after(t, in, Step(in, OperatorRequest{Request: *s.Request}))
	wantState(t, got, proto.StateRescueFailed, "rescue needs a rescue_password")
}

func TestTheFirstHeartbeatInRescueWaitHandsOverThePassword(t *testing.T) {
	n := node(proto.StateRescueWait, proto.StateRescue)
	n.InstanceInfo["rescue_password"] = "s3cret"
	in := input(t, n, withAgent(flowstate.State{HeartbeatPending: t0}), "direct")
	acts := Step(in, Classify(in))
	want(t, acts, "agent finalize rescue", "move resume", "move done")
	if pw := find[AgentFinalizeRescue](t, acts).Password; pw != "s3cret" {
		t.Errorf("password %q", pw)
	}
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateRescue, "")

	got, _ = after(t, in, Step(in, failedAt[AgentFinalizeRescue](t, acts, "refused")))
	wantState(t, got, proto.StateRescueFailed, "could not finalize rescue: refused")
}

func TestUnrescueBootsTheInstanceAndForgetsThePassword(t *testing.T) {
	n, s := requested(t, proto.StateRescue, proto.NoState, proto.VerbUnrescue)
	n.InstanceInfo["rescue_password"] = "s3cret"
	in := input(t, n, withAgent(s), "direct")
	acts := Step(in, OperatorRequest{Request: *s.Request})
	want(t, acts, "agent power off", "power off", "clean up ramdisk", "prepare instance", "power on", "move done")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateActive, "")
	if _, ok := got.InstanceInfo["rescue_password"]; ok || fs.Agent.URL != "" {
		t.Errorf("instance_info %v agent %+v: want the password and the agent gone", got.InstanceInfo, fs.Agent)
	}
}

func TestRescueWithoutAnAgentDeployIsImmediate(t *testing.T) {
	n, s := rescuable(t, "s3cret")
	want(t, Step(input(t, n, s, "fake"), OperatorRequest{Request: *s.Request}), "move done")
}
