package decide

import (
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// Adopt: manageable → adopting → active, for a machine already deployed.

func TestAdoptValidatesPowerAndBootThenReadsPower(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbAdopt)
	want(t, Step(input(t, n, s, "direct"), OperatorRequest{Request: *s.Request}), "validate power", "validate boot", "read power")
}

func TestAdoptEndsActiveWithThePowerStateRead(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbAdopt)
	in := input(t, n, s, "direct")
	acts := Step(in, PowerRead{State: proto.PowerOn})
	want(t, acts, "move done")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateActive, "")
	if *got.PowerState != proto.PowerOn || fs.Request != nil {
		t.Errorf("power %v request %v: want power on, request taken", *got.PowerState, fs.Request)
	}
}

func TestAdoptFailsWhenAnInterfaceDoesNotValidate(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbAdopt)
	in := input(t, n, s, "direct")
	first := Step(in, OperatorRequest{Request: *s.Request})
	acts := Step(in, ActionFailed{Action: first[1], Err: errString("no boot media")})
	want(t, acts, "move fail", "history ERROR")
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateAdoptFailed, "Error while attempting to adopt node "+nodeID+": no boot media")
}

type errString string

func (e errString) Error() string { return string(e) }
