package decide

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
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
	want(t, Step(in, Classify(in)), "management "+proto.OpGetBootDevice)
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

// A boot-device call the API waits on: its answer is recorded for the API,
// with the BMC check it amounts to.
func TestManagementAnswers(t *testing.T) {
	set := proto.ManagementRequest{ID: "r1", Op: proto.OpSetBootDevice, BootDevice: "pxe", Persistent: true}
	get := proto.ManagementRequest{ID: "r2", Op: proto.OpGetBootDevice}
	cases := []struct {
		name       string
		ev         ManagementAnswered
		wantResult string // the result as JSON
		wantCheck  string // the BMC check's error; "-" for no check recorded
		wantDevice string // the boot device recorded
	}{
		{"a device set", ManagementAnswered{Request: set},
			`{"id":"r1","boot_device":"pxe","persistent":true}`, "", "pxe"},
		{"a device read", ManagementAnswered{Request: get, Device: driver.BootDeviceState{Device: "disk", Persistent: false}},
			`{"id":"r2","boot_device":"disk","persistent":false}`, "", ""},
		{"a device the BMC does not allow", ManagementAnswered{Request: set, Err: driver.InvalidParameterf("cannot boot from Usb: it allows Pxe, Hdd")},
			`{"id":"r1","error":"Failed to set boot device for node ` + nodeID + `: cannot boot from Usb: it allows Pxe, Hdd","invalid":true}`, "-", ""},
		{"a BMC that fails", ManagementAnswered{Request: get, Err: errString("GET https://root:calvin@10.0.0.5/redfish/v1/Systems/1: 503")},
			`{"id":"r2","error":"Failed to get boot device for node ` + nodeID + `: GET https://` + secrets.Masked + `@10.0.0.5/redfish/v1/Systems/1: 503"}`,
			"GET https://" + secrets.Masked + "@10.0.0.5/redfish/v1/Systems/1: 503", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := node(proto.StateManageable, proto.NoState)
			req := tc.ev.Request
			in := input(t, n, flowstate.State{ManagementRequest: &req}, "direct")
			_, fs := after(t, in, Step(in, tc.ev))
			b, _ := json.Marshal(fs.ManagementResult)
			if string(b) != tc.wantResult {
				t.Errorf("result\n got %s\nwant %s", b, tc.wantResult)
			}
			if fs.ManagementRequest != nil {
				t.Error("the request is still pending")
			}
			switch {
			case tc.wantCheck == "-" && fs.LastBMCCheck != nil:
				t.Errorf("BMC check %+v recorded for a refused request", fs.LastBMCCheck)
			case tc.wantCheck != "-" && (fs.LastBMCCheck == nil || fs.LastBMCCheck.Error != tc.wantCheck || !fs.LastBMCCheck.At.Equal(t0)):
				t.Errorf("BMC check %+v, want error %q at t0", fs.LastBMCCheck, tc.wantCheck)
			}
			if got := ""; fs.BootDevice != nil {
				got = fs.BootDevice.Device
				if got != tc.wantDevice {
					t.Errorf("boot device %q, want %q", got, tc.wantDevice)
				}
			} else if tc.wantDevice != "" {
				t.Errorf("no boot device recorded, want %q", tc.wantDevice)
			}
		})
	}
}

func TestAnAnswerToAnOlderRequestLeavesTheNewOnePending(t *testing.T) {
	newer := proto.ManagementRequest{ID: "r9", Op: proto.OpGetBootDevice}
	in := input(t, node(proto.StateManageable, proto.NoState), flowstate.State{ManagementRequest: &newer}, "direct")
	_, fs := after(t, in, Step(in, ManagementAnswered{Request: proto.ManagementRequest{ID: "r1", Op: proto.OpGetBootDevice}}))
	if fs.ManagementRequest == nil || fs.ManagementRequest.ID != "r9" {
		t.Errorf("pending request %+v, want r9 kept", fs.ManagementRequest)
	}
}
