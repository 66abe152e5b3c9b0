package state

import (
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestAgentRuns(t *testing.T) {
	for _, tc := range []struct {
		s    proto.ProvisionState
		runs bool
	}{
		{proto.StateCleaning, true}, {proto.StateCleanWait, true}, {proto.StateCleanHold, true},
		{proto.StateDeploying, true}, {proto.StateDeployWait, true}, {proto.StateDeployHold, true},
		{proto.StateInspecting, true}, {proto.StateInspectWait, true},
		{proto.StateRescuing, true}, {proto.StateRescueWait, true},
		{proto.StateServicing, true}, {proto.StateServiceWait, true}, {proto.StateServiceHold, true},
		{proto.StateEnroll, false}, {proto.StateManageable, false}, {proto.StateAvailable, false},
		{proto.StateActive, false}, {proto.StateRescue, false}, {proto.StateError, false},
		{proto.StateVerifying, false}, {proto.StateAdopting, false}, {proto.StateDeleting, false},
		{proto.StateUnrescuing, false},
		{proto.StateCleanFailed, false}, {proto.StateDeployFailed, false}, {proto.StateInspectFailed, false},
		{proto.StateRescueFailed, false}, {proto.StateServiceFailed, false},
	} {
		if got := AgentRuns(tc.s); got != tc.runs {
			t.Errorf("AgentRuns(%q) = %v, want %v", tc.s, got, tc.runs)
		}
	}
}
