package decide

import (
	"testing"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// Abort at each wait: the API moves the node to its failed state with the
// reason as last_error; the conductor then stops the agent, powers the
// machine off and removes the ramdisk, adding to last_error only if powering
// off fails.

var waits = []struct {
	wait, target, failed proto.ProvisionState
}{
	{proto.StateCleanWait, proto.StateAvailable, proto.StateCleanFailed},
	{proto.StateDeployWait, proto.StateActive, proto.StateDeployFailed},
	{proto.StateInspectWait, proto.StateManageable, proto.StateInspectFailed},
	{proto.StateRescueWait, proto.StateRescue, proto.StateRescueFailed},
	{proto.StateServiceWait, proto.StateActive, proto.StateServiceFailed},
}

// aborted is the node as the API leaves it after abort in wait.
func aborted(t *testing.T, wait, target proto.ProvisionState) Input {
	n, s := requested(t, wait, target, proto.VerbAbort)
	reason := state.AbortedReason(wait)
	n.LastError = &reason
	s = withAgent(s)
	s.Steps = []proto.StepCall{firmwareStep}
	return input(t, n, s, "direct")
}

func TestAbortAtEachWaitStopsTheAgentAndPowersOff(t *testing.T) {
	for _, w := range waits {
		t.Run(string(w.wait), func(t *testing.T) {
			in := aborted(t, w.wait, w.target)
			if in.Node.ProvisionState != w.failed {
				t.Fatalf("the API left the node in %s, want %s", in.Node.ProvisionState, w.failed)
			}
			acts := Step(in, Classify(in))
			want(t, acts, "agent power off", "power off", "clean up ramdisk")
			got, fs := after(t, in, acts)
			wantState(t, got, w.failed, "Operation aborted by request while node was in "+string(w.wait))
			if *got.LastError != state.AbortedReason(w.wait) || fs.Request != nil || fs.Steps != nil {
				t.Errorf("last_error %q request %v plan %v: want the reason alone, the flow cleared", *got.LastError, fs.Request, fs.Steps)
			}
		})
	}
}

func TestAnAbortWhosePowerOffFailsSaysSo(t *testing.T) {
	for _, w := range waits {
		t.Run(string(w.wait), func(t *testing.T) {
			in := aborted(t, w.wait, w.target)
			acts := Step(in, failedAt[SetPower](t, Step(in, Classify(in)), "BMC unreachable"))
			want(t, acts, "clean up ramdisk")
			got, _ := after(t, in, acts)
			wantState(t, got, w.failed, state.AbortedReason(w.wait)+"; powering off failed: Failed to change power state to 'power off' for node "+nodeID+". Error: BMC unreachable")
		})
	}
}

func TestAnAbortWithoutAnAgentOnlyPowersOff(t *testing.T) {
	in := aborted(t, proto.StateCleanWait, proto.StateAvailable)
	in.State.Agent = flowstate.Agent{}
	want(t, Step(in, Classify(in)), "power off", "clean up ramdisk")
}
