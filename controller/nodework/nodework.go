// Package nodework says, from a node's record alone, when its conductor has
// something to do. The store derives indexed columns from it on every write,
// so that the conductor's periodic scan selects the few nodes with work by
// index instead of decoding every node; the conductor asks the same
// functions when it decides, so the two cannot disagree.
package nodework

import (
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// waitStates are where a node waits for its agent (the decision core's
// IsWait; a test in the conductor keeps the two equal).
var waitStates = map[proto.ProvisionState]bool{
	proto.StateCleanWait: true, proto.StateDeployWait: true, proto.StateInspectWait: true,
	proto.StateRescueWait: true, proto.StateServiceWait: true,
}

// IsWait reports whether s is a state where the node waits for its agent.
func IsWait(s proto.ProvisionState) bool { return waitStates[s] }

// Now reports whether n carries something for its conductor to do at once:
// a recorded request, a pending power or boot-device change, an agent
// heartbeat to act on, inspection data, a management request, or a flow
// interrupted between steps (its conductor died).
func Now(n *proto.Node) bool {
	fs, _ := flowstate.Read(n, flowstate.PartWork)
	if fs.Request != nil || fs.BootDevicePending || !fs.HeartbeatPending.IsZero() || fs.InspectionPending || fs.ManagementRequest != nil {
		return true
	}
	if n.TargetPowerState != nil {
		return true
	}
	return state.IsTransient(n.ProvisionState) && !IsWait(n.ProvisionState)
}

// Wait is what a node waiting for its agent times out from: the agent's
// last heartbeat once it has one (the heartbeat timeout runs from it),
// else the time the wait began (the call-back timeout runs from it). Both
// are zero when the node does not wait, or is in maintenance (a node in
// maintenance never times out).
type Wait struct {
	LastHeartbeat time.Time
	Since         time.Time
}

// WaitOf is n's Wait.
func WaitOf(n *proto.Node) Wait {
	if !waitStates[n.ProvisionState] || n.Maintenance {
		return Wait{}
	}
	fs, _ := flowstate.Read(n, flowstate.PartAgent)
	if !fs.Agent.LastHeartbeat.IsZero() {
		return Wait{LastHeartbeat: fs.Agent.LastHeartbeat}
	}
	if !fs.Agent.TokenIssued.IsZero() {
		// Looked up, not heard from since: the heartbeat timeout runs
		// from the lookup (see flowstate.Agent.TokenIssued).
		return Wait{LastHeartbeat: fs.Agent.TokenIssued}
	}
	if n.ProvisionUpdatedAt != nil {
		return Wait{Since: n.ProvisionUpdatedAt.Time}
	}
	return Wait{}
}
