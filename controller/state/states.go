// Package state is Kiln's provision state machine as a pure table: which
// provision states exist and what kind they are, which arrows join them, which
// API verbs may start an arrow at which microversion, and which node facts
// (maintenance, protected, retired, instance) forbid it.
//
// It exists so that the API (which validates a PUT …/states/provision before
// recording it) and the conductor (which moves a node along a flow) read the
// same table, and so that table can be tested without a database, a clock or a
// network. Nothing here does I/O: callers pass the node's facts in and store
// what comes back.
//
// The states, arrows and target_provision_state rules follow Ironic's state
// machine (ironic/common/state_machine.py) as described in
// spec/ironic-compat.md §1. Where Ironic's API checks differ from its own
// intent, the doc comment of the function says which one Kiln follows.
package state

import "github.com/kilnhq/kiln/proto"

// Kind classifies a provision state.
type Kind int

// Kinds of provision states.
const (
	// KindUnknown is the kind of a string that is not a provision state.
	KindUnknown Kind = iota
	// Stable states change only on request (an API verb).
	Stable
	// Transient states belong to a running flow; the conductor moves the node on.
	Transient
	// Failed states end a flow that went wrong; they keep the flow's target
	// so an operator can see what was being attempted.
	Failed
	// TargetOnly values appear in target_provision_state, never as a state.
	TargetOnly
)

func (k Kind) String() string {
	switch k {
	case Stable:
		return "stable"
	case Transient:
		return "transient"
	case Failed:
		return "failed"
	case TargetOnly:
		return "target-only"
	}
	return "unknown"
}

// stateInfo is one row of the state table.
type stateInfo struct {
	state proto.ProvisionState
	kind  Kind
	// target is the target_provision_state a node has while in this state when
	// the arrow that led here did not choose another (Ironic's per-state
	// default target). Stable states have none: target is null once stable.
	target proto.ProvisionState
}

// stateTable lists every provision state of §1 with its kind and default
// target. Manual cleaning overrides the clean* default (manageable instead of
// available); see the rows with keepTarget in transitions.
var stateTable = []stateInfo{
	{proto.StateEnroll, Stable, proto.NoState},
	{proto.StateManageable, Stable, proto.NoState},
	{proto.StateAvailable, Stable, proto.NoState},
	{proto.StateActive, Stable, proto.NoState},
	{proto.StateError, Stable, proto.NoState},
	{proto.StateRescue, Stable, proto.NoState},

	{proto.StateVerifying, Transient, proto.StateManageable},
	{proto.StateInspecting, Transient, proto.StateManageable},
	{proto.StateInspectWait, Transient, proto.StateManageable},
	{proto.StateCleaning, Transient, proto.StateAvailable},
	{proto.StateCleanWait, Transient, proto.StateAvailable},
	{proto.StateCleanHold, Transient, proto.StateAvailable},
	{proto.StateDeploying, Transient, proto.StateActive},
	{proto.StateDeployWait, Transient, proto.StateActive},
	{proto.StateDeployHold, Transient, proto.StateActive},
	{proto.StateDeleting, Transient, proto.StateAvailable},
	{proto.StateAdopting, Transient, proto.StateActive},
	{proto.StateRescuing, Transient, proto.StateRescue},
	{proto.StateRescueWait, Transient, proto.StateRescue},
	{proto.StateUnrescuing, Transient, proto.StateActive},
	{proto.StateServicing, Transient, proto.StateActive},
	{proto.StateServiceWait, Transient, proto.StateActive},
	{proto.StateServiceHold, Transient, proto.StateActive},

	{proto.StateInspectFailed, Failed, proto.StateManageable},
	{proto.StateCleanFailed, Failed, proto.StateAvailable},
	{proto.StateDeployFailed, Failed, proto.StateActive},
	{proto.StateAdoptFailed, Failed, proto.StateActive},
	{proto.StateRescueFailed, Failed, proto.StateRescue},
	{proto.StateUnrescueFailed, Failed, proto.StateActive},
	{proto.StateServiceFailed, Failed, proto.StateActive},

	{proto.StateDeleted, TargetOnly, proto.NoState},
	{proto.StateDeployComplete, TargetOnly, proto.NoState},
}

var stateIndex = func() map[proto.ProvisionState]stateInfo {
	m := make(map[proto.ProvisionState]stateInfo, len(stateTable))
	for _, s := range stateTable {
		if _, dup := m[s.state]; dup {
			panic("state: duplicate state " + string(s.state))
		}
		m[s.state] = s
	}
	return m
}()

// KindOf returns the kind of s; KindUnknown if s is not a provision state
// (including NoState).
func KindOf(s proto.ProvisionState) Kind { return stateIndex[s].kind }

// IsStable reports whether s waits for a request: enroll, manageable,
// available, active, error, rescue.
func IsStable(s proto.ProvisionState) bool { return KindOf(s) == Stable }

// IsTransient reports whether s is part of a running flow.
func IsTransient(s proto.ProvisionState) bool { return KindOf(s) == Transient }

// IsFailed reports whether s is one of the "… failed" states.
func IsFailed(s proto.ProvisionState) bool { return KindOf(s) == Failed }

// IsState reports whether s may appear as a node's provision_state. Use it to
// validate ?provision_state= filters and stored values.
func IsState(s proto.ProvisionState) bool {
	k := KindOf(s)
	return k == Stable || k == Transient || k == Failed
}

// States returns every provision state (not the target-only values), stable
// first, in the order of §1.
func States() []proto.ProvisionState {
	out := make([]proto.ProvisionState, 0, len(stateTable))
	for _, s := range stateTable {
		if s.kind != TargetOnly {
			out = append(out, s.state)
		}
	}
	return out
}

// DefaultTarget is the target_provision_state a node has while in s unless
// the flow chose another (manual cleaning keeps manageable): the stable state
// the flow of s aims at. It is NoState for stable states, because
// target_provision_state is null once a node is stable, and for non-states.
func DefaultTarget(s proto.ProvisionState) proto.ProvisionState { return stateIndex[s].target }
