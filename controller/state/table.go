package state

import "github.com/kilnhq/kiln/proto"

// Event names an arrow of the state machine. The first group is what API
// verbs map to (aliases collapse: active and deploy are EvDeploy, deleted and
// undeploy are EvDelete); the second group is raised only by the conductor as
// a flow progresses. The strings are Ironic's event names, which show up in
// node history and logs.
type Event string

// Events started by API verbs.
const (
	EvManage   Event = "manage"
	EvProvide  Event = "provide"
	EvInspect  Event = "inspect"
	EvAdopt    Event = "adopt"
	EvAbort    Event = "abort"
	EvClean    Event = "clean"
	EvDeploy   Event = "deploy"
	EvRebuild  Event = "rebuild"
	EvDelete   Event = "delete"
	EvRescue   Event = "rescue"
	EvUnrescue Event = "unrescue"
	EvUnhold   Event = "unhold"
	EvService  Event = "service"
)

// Events raised by the conductor.
const (
	// EvDone: the flow finished; go to its stable goal.
	EvDone Event = "done"
	// EvFail: the flow failed (error, or a call-back timeout); go to the fail state.
	EvFail Event = "fail"
	// EvWait: the flow now waits for the agent (heartbeat) or the BMC.
	EvWait Event = "wait"
	// EvResume: the awaited call-back came; continue the flow.
	EvResume Event = "resume"
	// EvHold: a step asked to hold the node for an operator (…hold states).
	EvHold Event = "hold"
)

// targetRule says what target_provision_state an arrow leaves behind when it
// ends in a state that is not stable (stable states always clear it).
type targetRule string

const (
	// tDefault: the default target of the destination (DefaultTarget).
	tDefault targetRule = ""
	// tKeep: keep the node's current target (the default if it has none).
	// Cleaning uses it: the same clean* states serve automated cleaning
	// (target available) and manual cleaning (target manageable), and every
	// arrow inside a clean must carry the choice made when it started.
	tKeep targetRule = "(keep)"
	// tManageable: manual cleaning starts with target manageable.
	tManageable = targetRule(proto.StateManageable)
)

// cond guards arrows that share a state and an event and differ by the flow
// that is running. Only the end of cleaning needs one.
type cond int

const (
	always cond = iota
	// automated: cleaning that was started by provide or by undeploy
	// (target available) of a node that is not retired.
	automated
	// manualOrRetired: manual cleaning (target manageable), or automated
	// cleaning of a retired node, which must not become available.
	manualOrRetired
)

// row is one arrow of the state machine.
type row struct {
	from   proto.ProvisionState
	event  Event
	to     proto.ProvisionState
	target targetRule
	// minor is the microversion the API needs for this arrow on top of its
	// verb's minimum (Ironic checks these after the state): abort from inspect
	// wait (1.41) and from wait call-back (1.110); unhold (1.85) and service
	// (1.87), which Ironic checks only once the state allowed the verb.
	minor int
	when  cond
	// internal arrows carry a verb event but are raised by the conductor only:
	// Ironic's table lets the API send "clean" to a deleting node, Kiln does not.
	internal bool
	// deferrable aborts stop a step flow: if the running step is not
	// abortable the conductor marks it abort_after and the node stays where it
	// is until the step ends (§1 "abort in clean wait needs an abortable step").
	deferrable bool
}

// transitions is the whole machine of spec §1 (Ironic's state_machine.py),
// grouped by flow. Request uses the rows whose event is a verb event (and not
// internal); Next uses every row.
var transitions = []row{
	// Enrollment: manage verifies the BMC credentials.
	{from: proto.StateEnroll, event: EvManage, to: proto.StateVerifying},
	{from: proto.StateVerifying, event: EvDone, to: proto.StateManageable},
	{from: proto.StateVerifying, event: EvFail, to: proto.StateEnroll},

	// Manageable and available.
	{from: proto.StateAvailable, event: EvManage, to: proto.StateManageable},
	{from: proto.StateManageable, event: EvProvide, to: proto.StateCleaning}, // automated clean, target available
	{from: proto.StateManageable, event: EvClean, to: proto.StateCleaning, target: tManageable},

	// Cleaning (automated after provide/undeploy, or manual).
	{from: proto.StateCleaning, event: EvDone, to: proto.StateAvailable, when: automated},
	{from: proto.StateCleaning, event: EvDone, to: proto.StateManageable, when: manualOrRetired},
	{from: proto.StateCleaning, event: EvWait, to: proto.StateCleanWait, target: tKeep},
	{from: proto.StateCleaning, event: EvHold, to: proto.StateCleanHold, target: tKeep},
	{from: proto.StateCleaning, event: EvFail, to: proto.StateCleanFailed, target: tKeep},
	{from: proto.StateCleanWait, event: EvResume, to: proto.StateCleaning, target: tKeep},
	{from: proto.StateCleanWait, event: EvHold, to: proto.StateCleanHold, target: tKeep},
	{from: proto.StateCleanWait, event: EvFail, to: proto.StateCleanFailed, target: tKeep},
	{from: proto.StateCleanWait, event: EvAbort, to: proto.StateCleanFailed, target: tKeep, deferrable: true},
	{from: proto.StateCleanHold, event: EvUnhold, to: proto.StateCleanWait, target: tKeep, minor: 85},
	{from: proto.StateCleanHold, event: EvAbort, to: proto.StateCleanFailed, target: tKeep, deferrable: true},
	{from: proto.StateCleanFailed, event: EvManage, to: proto.StateManageable},

	// Inspection.
	{from: proto.StateManageable, event: EvInspect, to: proto.StateInspecting},
	{from: proto.StateInspecting, event: EvDone, to: proto.StateManageable},
	{from: proto.StateInspecting, event: EvWait, to: proto.StateInspectWait},
	{from: proto.StateInspecting, event: EvFail, to: proto.StateInspectFailed},
	{from: proto.StateInspectWait, event: EvResume, to: proto.StateInspecting},
	{from: proto.StateInspectWait, event: EvDone, to: proto.StateManageable},
	{from: proto.StateInspectWait, event: EvFail, to: proto.StateInspectFailed},
	{from: proto.StateInspectWait, event: EvAbort, to: proto.StateInspectFailed, minor: 41},
	{from: proto.StateInspectFailed, event: EvManage, to: proto.StateManageable},
	{from: proto.StateInspectFailed, event: EvInspect, to: proto.StateInspecting},

	// Adoption: take over a node deployed by other means.
	{from: proto.StateManageable, event: EvAdopt, to: proto.StateAdopting},
	{from: proto.StateAdopting, event: EvDone, to: proto.StateActive},
	{from: proto.StateAdopting, event: EvFail, to: proto.StateAdoptFailed},
	{from: proto.StateAdoptFailed, event: EvAdopt, to: proto.StateAdopting},
	{from: proto.StateAdoptFailed, event: EvManage, to: proto.StateManageable},

	// Deployment.
	{from: proto.StateAvailable, event: EvDeploy, to: proto.StateDeploying},
	{from: proto.StateDeploying, event: EvDone, to: proto.StateActive},
	{from: proto.StateDeploying, event: EvWait, to: proto.StateDeployWait},
	{from: proto.StateDeploying, event: EvHold, to: proto.StateDeployHold},
	{from: proto.StateDeploying, event: EvFail, to: proto.StateDeployFailed},
	{from: proto.StateDeployWait, event: EvResume, to: proto.StateDeploying},
	{from: proto.StateDeployWait, event: EvHold, to: proto.StateDeployHold},
	{from: proto.StateDeployWait, event: EvFail, to: proto.StateDeployFailed},
	{from: proto.StateDeployWait, event: EvAbort, to: proto.StateDeployFailed, minor: 110},
	{from: proto.StateDeployWait, event: EvDelete, to: proto.StateDeleting},
	{from: proto.StateDeployHold, event: EvUnhold, to: proto.StateDeployWait, minor: 85},
	{from: proto.StateDeployHold, event: EvAbort, to: proto.StateDeployFailed},
	{from: proto.StateDeployFailed, event: EvDeploy, to: proto.StateDeploying},
	{from: proto.StateDeployFailed, event: EvRebuild, to: proto.StateDeploying},
	{from: proto.StateDeployFailed, event: EvDelete, to: proto.StateDeleting},
	{from: proto.StateActive, event: EvRebuild, to: proto.StateDeploying},
	{from: proto.StateError, event: EvRebuild, to: proto.StateDeploying},

	// Tear down: deleting, then automated cleaning (target stays available).
	{from: proto.StateActive, event: EvDelete, to: proto.StateDeleting},
	{from: proto.StateError, event: EvDelete, to: proto.StateDeleting},
	{from: proto.StateDeleting, event: EvClean, to: proto.StateCleaning, internal: true},
	{from: proto.StateDeleting, event: EvFail, to: proto.StateError},

	// Rescue.
	{from: proto.StateActive, event: EvRescue, to: proto.StateRescuing},
	{from: proto.StateRescuing, event: EvDone, to: proto.StateRescue},
	{from: proto.StateRescuing, event: EvWait, to: proto.StateRescueWait},
	{from: proto.StateRescuing, event: EvFail, to: proto.StateRescueFailed},
	{from: proto.StateRescueWait, event: EvResume, to: proto.StateRescuing},
	{from: proto.StateRescueWait, event: EvFail, to: proto.StateRescueFailed},
	{from: proto.StateRescueWait, event: EvAbort, to: proto.StateRescueFailed},
	{from: proto.StateRescueWait, event: EvDelete, to: proto.StateDeleting},
	{from: proto.StateRescue, event: EvRescue, to: proto.StateRescuing},
	{from: proto.StateRescue, event: EvUnrescue, to: proto.StateUnrescuing},
	{from: proto.StateRescue, event: EvDelete, to: proto.StateDeleting},
	{from: proto.StateRescueFailed, event: EvRescue, to: proto.StateRescuing},
	{from: proto.StateRescueFailed, event: EvUnrescue, to: proto.StateUnrescuing},
	{from: proto.StateRescueFailed, event: EvDelete, to: proto.StateDeleting},
	{from: proto.StateUnrescuing, event: EvDone, to: proto.StateActive},
	{from: proto.StateUnrescuing, event: EvFail, to: proto.StateUnrescueFailed},
	{from: proto.StateUnrescueFailed, event: EvRescue, to: proto.StateRescuing},
	{from: proto.StateUnrescueFailed, event: EvUnrescue, to: proto.StateUnrescuing},
	{from: proto.StateUnrescueFailed, event: EvDelete, to: proto.StateDeleting},

	// Servicing: steps on an active node.
	{from: proto.StateActive, event: EvService, to: proto.StateServicing, minor: 87},
	{from: proto.StateServicing, event: EvDone, to: proto.StateActive},
	{from: proto.StateServicing, event: EvWait, to: proto.StateServiceWait},
	{from: proto.StateServicing, event: EvHold, to: proto.StateServiceHold},
	{from: proto.StateServicing, event: EvFail, to: proto.StateServiceFailed},
	{from: proto.StateServiceWait, event: EvResume, to: proto.StateServicing},
	{from: proto.StateServiceWait, event: EvHold, to: proto.StateServiceHold},
	{from: proto.StateServiceWait, event: EvFail, to: proto.StateServiceFailed},
	{from: proto.StateServiceWait, event: EvAbort, to: proto.StateServiceFailed, deferrable: true},
	{from: proto.StateServiceWait, event: EvDelete, to: proto.StateDeleting},
	{from: proto.StateServiceHold, event: EvUnhold, to: proto.StateServiceWait, minor: 85},
	{from: proto.StateServiceHold, event: EvService, to: proto.StateServicing, minor: 87},
	{from: proto.StateServiceHold, event: EvFail, to: proto.StateServiceFailed},
	{from: proto.StateServiceHold, event: EvAbort, to: proto.StateServiceFailed, deferrable: true},
	{from: proto.StateServiceFailed, event: EvService, to: proto.StateServicing, minor: 87},
	{from: proto.StateServiceFailed, event: EvRescue, to: proto.StateRescuing},
	{from: proto.StateServiceFailed, event: EvDelete, to: proto.StateDeleting},
	{from: proto.StateServiceFailed, event: EvAbort, to: proto.StateActive},
	// Ironic also lets a failed service continue waiting or be held.
	{from: proto.StateServiceFailed, event: EvWait, to: proto.StateServiceWait},
	{from: proto.StateServiceFailed, event: EvHold, to: proto.StateServiceHold},
}

// Arrow is one arrow of the table, exported for documentation tools and
// tests of other packages (e.g. a flow test that walks every arrow).
type Arrow struct {
	From  proto.ProvisionState
	Event Event
	To    proto.ProvisionState
	// API is true if a provision verb may take this arrow.
	API bool
	// MinMinor is the microversion the arrow needs beyond its verb's own
	// minimum (0 if none).
	MinMinor int
}

// Arrows returns a copy of the transition table.
func Arrows() []Arrow {
	out := make([]Arrow, len(transitions))
	for i, r := range transitions {
		out[i] = Arrow{From: r.from, Event: r.event, To: r.to, API: r.api(), MinMinor: r.minor}
	}
	return out
}

// api reports whether a provision verb may take the row.
func (r row) api() bool { return isVerbEvent(r.event) && !r.internal }

// matches reports whether the row applies to a node in state from with the
// given target and retired flag.
func (r row) matches(from proto.ProvisionState, ev Event, target proto.ProvisionState, retired bool) bool {
	if r.from != from || r.event != ev {
		return false
	}
	manual := target == proto.StateManageable
	switch r.when {
	case automated:
		return !manual && !retired
	case manualOrRetired:
		return manual || retired
	}
	return true
}

// targetAfter is the target_provision_state once the row was taken by a node
// whose target was cur.
func (r row) targetAfter(cur proto.ProvisionState) proto.ProvisionState {
	if IsStable(r.to) {
		return proto.NoState
	}
	switch r.target {
	case tDefault:
		return DefaultTarget(r.to)
	case tKeep:
		if cur != proto.NoState {
			return cur
		}
		return DefaultTarget(r.to)
	}
	return proto.ProvisionState(r.target)
}
