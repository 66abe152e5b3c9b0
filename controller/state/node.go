package state

import (
	"fmt"

	"github.com/kilnhq/kiln/proto"
)

// deleteAllowed are the states in which DELETE /v1/nodes/{id} may remove a
// node that is not in maintenance (Ironic's DELETE_ALLOWED_STATES plus
// available, as allow_deleting_available_nodes defaults to true). Failed
// states are left out on purpose: a node in deploy failed still holds a
// tenant's disk and must be torn down first.
var deleteAllowed = []proto.ProvisionState{
	proto.StateManageable, proto.StateEnroll, proto.StateAdoptFailed, proto.StateAvailable,
}

// DeleteAllowed decides DELETE /v1/nodes/{id} for node n whose instance_uuid
// is instanceUUID ("" = null). Checks in Ironic's order:
//   - an instance is associated → Conflict, unless the node is in maintenance
//     (maintenance exists to let operators drop hopelessly broken nodes);
//   - the node is protected → Forbidden, always;
//   - the state is not manageable, enroll, adopt failed or available and
//     the node is not in maintenance → Conflict.
func DeleteAllowed(n Node, instanceUUID string) error {
	if !n.Maintenance && instanceUUID != "" {
		return nodeErr(Conflict,
			fmt.Sprintf("delete refused: node associated with instance %s", instanceUUID),
			"Node ", " is associated with instance "+instanceUUID+".")
	}
	if n.Protected {
		return nodeErr(Forbidden, "delete refused: node is protected",
			"Node ", " is protected and cannot be undeployed, rebuilt or deleted")
	}
	if n.Maintenance || contains(deleteAllowed, n.State) {
		return nil
	}
	// Ironic prints its Python tuple of allowed states.
	valid := "("
	for i, s := range deleteAllowed {
		if i > 0 {
			valid += ", "
		}
		valid += "'" + string(s) + "'"
	}
	valid += ")"
	return nodeErr(Conflict,
		fmt.Sprintf("delete refused in provision state %q", n.State),
		`Can not delete node "`,
		fmt.Sprintf(`" while it is in provision state "%s". Valid provision states to perform deletion are: "%s", or set the node into maintenance mode`, n.State, valid))
}

// lookupStates are where GET /v1/lookup finds a node: the agent is expected
// to be running there (§3.2).
var lookupStates = []proto.ProvisionState{
	proto.StateDeploying, proto.StateDeployWait, proto.StateCleaning, proto.StateCleanWait,
	proto.StateInspecting, proto.StateInspectWait, proto.StateRescuing, proto.StateRescueWait,
	proto.StateServiceWait,
}

// fastTrackLookupStates adds the states where a fast-track agent stays up
// waiting for its next job.
var fastTrackLookupStates = append(append([]proto.ProvisionState{}, lookupStates...),
	proto.StateEnroll, proto.StateManageable, proto.StateAvailable,
	proto.StateServicing, proto.StateServiceHold)

// LookupAllowed reports whether the agent lookup may return a node in state s;
// outside these states the API answers 404 so a stray ramdisk learns nothing.
// fastTrack is the node's (or the configuration's) fast_track setting.
func LookupAllowed(s proto.ProvisionState, fastTrack bool) bool {
	if fastTrack {
		return contains(fastTrackLookupStates, s)
	}
	return contains(lookupStates, s)
}

// HeartbeatAction says what the controller does with an agent heartbeat.
type HeartbeatAction int

// Heartbeat actions.
const (
	// HeartbeatIgnore: the state does not expect an agent; log and drop it
	// (the API still answers 202).
	HeartbeatIgnore HeartbeatAction = iota
	// HeartbeatRecord: store agent_url, agent_version, agent_last_heartbeat
	// (and agent_verify_ca) in driver_internal_info, take no step.
	HeartbeatRecord
	// HeartbeatAct: record, then drive the flow (continue deploy, clean,
	// rescue or service: poll the agent's commands, run the next step).
	HeartbeatAct
)

func (a HeartbeatAction) String() string {
	switch a {
	case HeartbeatRecord:
		return "record"
	case HeartbeatAct:
		return "act"
	}
	return "ignore"
}

// heartbeatWaitStates are where a heartbeat moves the flow on (§3.3).
var heartbeatWaitStates = []proto.ProvisionState{
	proto.StateDeployWait, proto.StateCleanWait, proto.StateRescueWait, proto.StateServiceWait,
}

// heartbeatRecordStates accept heartbeats only to know the agent is alive: a
// flow is busy (…ing), held for an operator (…hold), or, with fast track,
// the agent idles in a stable state waiting for work.
var heartbeatRecordStates = []proto.ProvisionState{
	proto.StateDeploying, proto.StateCleaning, proto.StateRescuing, proto.StateServicing,
	proto.StateDeployHold, proto.StateCleanHold, proto.StateServiceHold,
}

var heartbeatFastTrackStates = []proto.ProvisionState{
	proto.StateEnroll, proto.StateManageable, proto.StateAvailable,
}

// Heartbeat decides what a heartbeat from the agent of a node in state s
// does. A node in maintenance only records: the flow pauses until
// maintenance is cleared (Ironic's allow_provisioning_in_maintenance default).
func Heartbeat(s proto.ProvisionState, fastTrack, maintenance bool) HeartbeatAction {
	switch {
	case contains(heartbeatWaitStates, s):
		if maintenance {
			return HeartbeatRecord
		}
		return HeartbeatAct
	case contains(heartbeatRecordStates, s):
		return HeartbeatRecord
	case fastTrack && contains(heartbeatFastTrackStates, s):
		return HeartbeatRecord
	}
	return HeartbeatIgnore
}

// updateAllowed are the non-stable states in which PATCH may still change a
// node (Ironic's UPDATE_ALLOWED_STATES): failed states, so operators can fix
// what made a flow fail, and states whose flow does not touch the fields.
var updateAllowed = []proto.ProvisionState{
	proto.StateDeployFailed, proto.StateInspecting, proto.StateInspectFailed, proto.StateInspectWait,
	proto.StateCleanFailed, proto.StateError, proto.StateVerifying, proto.StateAdoptFailed,
	proto.StateRescueFailed, proto.StateUnrescueFailed, proto.StateServiceHold, proto.StateServiceFailed,
}

// MinorInspectWait is the microversion from which a node in inspecting may
// no longer be patched (inspect wait exists from then on).
const MinorInspectWait = 39

// PatchAllowed decides whether PATCH /v1/nodes/{id} may change node n at
// microversion 1.minor. onlyRemovesInstanceUUID is true when the patch is
// exactly [{"op":"remove","path":"/instance_uuid"}], which is always allowed
// in maintenance so operators can free a node stuck in a transition.
// A node with a target (a flow running) outside updateAllowed → Conflict;
// inspecting at ≥1.39 → Conflict.
func PatchAllowed(n Node, minor int, onlyRemovesInstanceUUID bool) error {
	if n.Maintenance && onlyRemovesInstanceUUID {
		return nil
	}
	if n.Target != proto.NoState && !contains(updateAllowed, n.State) {
		return nodeErr(Conflict,
			fmt.Sprintf("patch refused during transition (state %q, target %q)", n.State, n.Target),
			"Node ", " can not be updated while a state transition is in progress.")
	}
	if n.State == proto.StateInspecting && minor >= MinorInspectWait {
		return nodeErr(Conflict, "patch refused while inspecting",
			`Cannot update node "`, `" while it is in state "inspecting".`)
	}
	return nil
}

func contains(list []proto.ProvisionState, s proto.ProvisionState) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
