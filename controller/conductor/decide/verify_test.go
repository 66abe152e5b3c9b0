package decide

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// Verify: enroll → verifying → manageable once the BMC answers.

func TestVerifyAsksTheBMCForItsPowerState(t *testing.T) {
	n, s := requested(t, proto.StateEnroll, proto.NoState, proto.VerbManage)
	acts := Step(input(t, n, s, "fake"), Classify(input(t, n, s, "fake")))
	want(t, acts, "validate power", "read power")
}

func TestVerifyEndsInManageableWithThePowerStateAndABMCCheck(t *testing.T) {
	n, s := requested(t, proto.StateEnroll, proto.NoState, proto.VerbManage)
	in := input(t, n, s, "fake")
	acts := Step(in, PowerRead{State: proto.PowerOn})
	want(t, acts, "move done")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateManageable, "")
	if got.PowerState == nil || *got.PowerState != proto.PowerOn {
		t.Errorf("power state %v, want power on", got.PowerState)
	}
	if fs.Request != nil || fs.LastBMCCheck == nil || fs.LastBMCCheck.Error != "" || !fs.LastBMCCheck.At.Equal(t0) {
		t.Errorf("request %v, BMC check %+v: want the request taken and a good check at t0", fs.Request, fs.LastBMCCheck)
	}
}

func TestVerifyFailsBackToEnrollWhenTheBMCRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failAt func(*testing.T, []Action) ActionFailed
		prefix string
	}{
		{"credentials refused", func(t *testing.T, a []Action) ActionFailed {
			return failedAt[Validate](t, a, "GET https://admin:hunter2@10.0.0.5/redfish/v1: 401")
		}, "Failed to validate power driver interface for node " + nodeID},
		{"power state unreadable", func(t *testing.T, a []Action) ActionFailed { return failedAt[ReadPower](t, a, "timeout") },
			"Failed to get power state for node " + nodeID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, s := requested(t, proto.StateEnroll, proto.NoState, proto.VerbManage)
			in := input(t, n, s, "fake")
			acts := Step(in, tc.failAt(t, Step(in, OperatorRequest{Request: *s.Request})))
			want(t, acts, "move fail", "history ERROR")
			got, fs := after(t, in, acts)
			wantState(t, got, proto.StateEnroll, tc.prefix)
			if fs.LastBMCCheck == nil || fs.LastBMCCheck.Operation != "verify" || fs.LastBMCCheck.Error == "" {
				t.Fatalf("BMC check %+v, want the failure recorded", fs.LastBMCCheck)
			}
			if strings.Contains(fs.LastBMCCheck.Error, "hunter2") {
				t.Errorf("BMC check shows a password: %q", fs.LastBMCCheck.Error)
			}
		})
	}
}
