package decide

import (
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Operator requests outside the provision flows: power, boot device, and a
// node whose hardware type cannot be resolved.

func TestAPowerRequestDrivesTheBMCAndClearsLastError(t *testing.T) {
	n := node(proto.StateActive, proto.NoState)
	soft := proto.PowerSoftOff
	n.TargetPowerState = &soft
	old := "old error"
	n.LastError = &old
	in := input(t, n, withAgent(flowstate.State{PowerTimeout: 90}), "direct")
	ev := Classify(in)
	if ev != (PowerRequested{Target: proto.PowerSoftOff, Timeout: 90 * time.Second}) {
		t.Fatalf("event %#v", ev)
	}
	acts := Step(in, ev)
	want(t, acts, "soft power off")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateActive, "")
	if fs.PowerTimeout != 0 || fs.Agent.URL != "" {
		t.Errorf("timeout %d agent %+v: want both cleared (a power change ends the agent)", fs.PowerTimeout, fs.Agent)
	}
}

func TestAFailedPowerRequestIsReportedNotAFlowFailure(t *testing.T) {
	n := node(proto.StateActive, proto.NoState)
	on := proto.PowerOn
	n.TargetPowerState = &on
	in := input(t, n, flowstate.State{}, "direct")
	acts := Step(in, failedAt[SetPower](t, Step(in, Classify(in)), "BMC says no"))
	want(t, acts, "history ERROR")
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateActive, "Failed to change power state to 'power on' for node "+nodeID+". Error: BMC says no")
	if got.TargetPowerState != nil {
		t.Errorf("target power %v, want cleared", *got.TargetPowerState)
	}
}

func TestAPendingBootDeviceIsSetAndFailuresKept(t *testing.T) {
	n := node(proto.StateManageable, proto.NoState)
	in := input(t, n, flowstate.State{BootDevicePending: true, BootDevice: &flowstate.BootDevice{Device: "pxe", Persistent: true}}, "direct")
	acts := Step(in, Classify(in))
	want(t, acts, "boot device pxe")
	if bd := find[SetBootDevice](t, acts); !bd.Persistent || !bd.Operator {
		t.Errorf("%+v", bd)
	}
	got, fs := after(t, in, Step(in, failedAt[SetBootDevice](t, acts, "not allowed")))
	wantState(t, got, proto.StateManageable, "Failed to set boot device pxe for node "+nodeID+". Error: not allowed")
	if fs.BootDevicePending {
		t.Error("boot device still pending")
	}
}

func TestAManagementRequestGoesBeforeAPowerChange(t *testing.T) {
	n := node(proto.StateActive, proto.NoState)
	on := proto.PowerOn
	n.TargetPowerState = &on
	in := input(t, n, flowstate.State{ManagementRequest: &proto.ManagementRequest{ID: "r1", Op: proto.OpGetBootDevice}}, "direct")
	want(t, Step(in, Classify(in)), "management request")
}

func TestAnUnresolvableDriverFailsAFlowButOnlyMarksAStableNode(t *testing.T) {
	n, s := deployable(t)
	in := input(t, n, s, "direct")
	got, _ := after(t, in, Step(in, DriverUnavailable{Err: errString(`hardware type "gone" is not enabled`)}))
	wantState(t, got, proto.StateDeployFailed, `Node `+nodeID+`: hardware type "gone" is not enabled`)

	n = node(proto.StateManageable, proto.NoState)
	on := proto.PowerOn
	n.TargetPowerState = &on
	in = input(t, n, flowstate.State{ManagementRequest: &proto.ManagementRequest{ID: "r2"}, BootDevicePending: true}, "direct")
	got, fs := after(t, in, Step(in, DriverUnavailable{Err: errString("gone")}))
	wantState(t, got, proto.StateManageable, "gone")
	if got.TargetPowerState != nil || fs.BootDevicePending || fs.ManagementRequest != nil || fs.ManagementResult == nil || fs.ManagementResult.Error != "gone" {
		t.Errorf("target %v pending %v request %v result %+v: want all answered with the error", got.TargetPowerState, fs.BootDevicePending, fs.ManagementRequest, fs.ManagementResult)
	}
}

func TestAnUnreadableFlowStateFailsTheFlow(t *testing.T) {
	n := node(proto.StateDeployWait, proto.StateActive)
	in := input(t, n, flowstate.State{}, "direct")
	got, _ := after(t, in, Step(in, BadState{Err: errString("step index is a string")}))
	wantState(t, got, proto.StateDeployFailed, "unreadable flow state: step index is a string")
}
