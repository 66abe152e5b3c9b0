package decide

import (
	"fmt"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// startFlow takes up the provision request the API recorded; the API has
// already moved the node into the verb's first state.
func startFlow(in Input, req flowstate.Request) []Action {
	switch in.Node.ProvisionState {
	case proto.StateVerifying:
		return verify(in)
	case proto.StateCleaning:
		return startCleaning(in, req)
	case proto.StateInspecting:
		return startInspection(in)
	case proto.StateDeploying:
		return startDeploy(in, req)
	case proto.StateDeleting:
		return startDelete(in)
	case proto.StateAdopting:
		return adopt(in)
	case proto.StateRescuing:
		return startRescue(in)
	case proto.StateUnrescuing:
		return unrescue(in)
	case proto.StateServicing:
		return startService(in, req)
	case proto.StateCleanFailed, proto.StateDeployFailed, proto.StateInspectFailed, proto.StateRescueFailed, proto.StateServiceFailed:
		if req.Verb == string(proto.VerbAbort) {
			return abort(in)
		}
	}
	// Verbs that only move the node between stable states need no action.
	return []Action{Update{Flow: func(s *flowstate.State) { s.Request = nil }}}
}

// operatorPower carries out PUT …/states/power.
func operatorPower(in Input, ev PowerRequested) []Action {
	return []Action{
		Update{Flow: (*flowstate.State).WipeAgent},
		SetPower{Target: ev.Target, Timeout: ev.Timeout, Operator: true},
		Update{Node: func(n *proto.Node) { n.LastError = nil }, Flow: func(s *flowstate.State) { s.PowerTimeout = 0 }},
	}
}

// verify checks the power credentials: enroll → verifying → manageable.
func verify(in Input) []Action {
	uuid := in.Node.UUID
	return []Action{
		Validate{Interface: "power", OnError: OnError{Prefix: fmt.Sprintf("Failed to validate power driver interface for node %s. Error: ", uuid)}},
		ReadPower{OnError: OnError{Prefix: fmt.Sprintf("Failed to get power state for node %s. Error: ", uuid)}},
	}
}

// adopt takes an already-deployed machine under management.
func adopt(in Input) []Action {
	onErr := OnError{Prefix: fmt.Sprintf("Error while attempting to adopt node %s: ", in.Node.UUID)}
	return []Action{Validate{Interface: "power", OnError: onErr}, Validate{Interface: "boot", OnError: onErr}, ReadPower{OnError: onErr}}
}

// powerRead ends verification and adoption with the power state read.
func powerRead(in Input, ps proto.PowerState) []Action {
	switch in.Node.ProvisionState {
	case proto.StateVerifying:
		check := proto.BMCCheck{At: in.Now, Operation: "verify"}
		return []Action{Update{Move: state.EvDone,
			Node: func(n *proto.Node) { n.PowerState = &ps },
			Flow: func(s *flowstate.State) { s.LastBMCCheck = &check; s.Request = nil }}}
	case proto.StateAdopting:
		return []Action{Update{Move: state.EvDone,
			Node: func(n *proto.Node) { n.PowerState = &ps },
			Flow: func(s *flowstate.State) { s.Request = nil }}}
	}
	return nil
}

// isAbort: the node is in a failed state with an abort to finish.
func isAbort(in Input) bool {
	return in.State.Request != nil && in.State.Request.Verb == string(proto.VerbAbort) && state.IsFailed(in.Node.ProvisionState)
}

// abort finishes an abort the API recorded: the node is already in its
// failed state; stop the agent and power the machine off.
func abort(in Input) []Action {
	var acts []Action
	if agentURL(in) != "" {
		acts = append(acts, AgentPowerOff{Timeout: abortAgentTimeout})
	}
	acts = append(acts, power(proto.PowerOff, OnError{})...)
	return append(acts, finishAbort(in, "")...)
}

// finishAbort records why the flow ended (with note, what went wrong).
func finishAbort(in Input, note string) []Action {
	var from proto.ProvisionState
	if in.State.Request != nil {
		from = in.State.Request.From
	}
	msg := state.AbortedReason(from) + note
	return []Action{
		CleanUpRamdisk{OnError: OnError{Ignore: true}},
		Update{Node: func(n *proto.Node) {
			n.LastError = &msg
			n.CleanStep, n.DeployStep = proto.Dict{}, proto.Dict{}
		}, Flow: (*flowstate.State).ClearFlow},
	}
}
