package decide

import (
	"fmt"
	"maps"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// waitStates are where a node waits for its agent.
var waitStates = map[proto.ProvisionState]bool{
	proto.StateCleanWait: true, proto.StateDeployWait: true, proto.StateInspectWait: true,
	proto.StateRescueWait: true, proto.StateServiceWait: true,
}

// IsWait reports whether s is a state where the node waits for its agent.
func IsWait(s proto.ProvisionState) bool { return waitStates[s] }

// isTransient: a flow runs in s (the conductor acts, or waits for the agent).
func isTransient(s proto.ProvisionState) bool { return state.IsTransient(s) && !waitStates[s] }

// TimeoutReason says why n has waited for its agent too long (no first
// heartbeat within CallbackTimeout, or a running agent silent for longer than
// the heartbeat timeout it was given); empty when it has not.
func TimeoutReason(in Input) string {
	n := in.Node
	if !waitStates[n.ProvisionState] || n.Maintenance {
		return ""
	}
	if last := in.State.Agent.LastHeartbeat; !last.IsZero() {
		if in.Now.Sub(last) > in.Config.AgentHeartbeatTimeout {
			return fmt.Sprintf("The agent on node %s stopped heartbeating: last heartbeat %s ago, more than the %s heartbeat timeout, while the node was in %s",
				n.UUID, in.Now.Sub(last).Round(time.Second), in.Config.AgentHeartbeatTimeout, n.ProvisionState)
		}
		return ""
	}
	if issued := in.State.Agent.TokenIssued; !issued.IsZero() {
		// The agent looked up and runs: its heartbeat timeout applies, as
		// after a heartbeat. Ironic waits for the call-back timeout here,
		// but an agent whose lookup answer (with its token) was lost can
		// never heartbeat.
		if in.Now.Sub(issued) <= in.Config.AgentHeartbeatTimeout {
			return ""
		}
		return fmt.Sprintf("The agent on node %s looked up %s ago and has not heartbeated since, more than the %s heartbeat timeout, while the node was in %s: the lookup's answer, which carried its token, was probably lost",
			n.UUID, in.Now.Sub(issued).Round(time.Second), in.Config.AgentHeartbeatTimeout, n.ProvisionState)
	}
	if n.ProvisionUpdatedAt != nil && in.Now.Sub(n.ProvisionUpdatedAt.Time) > in.Config.CallbackTimeout {
		return fmt.Sprintf("Timeout reached while waiting for callback for node %s: no agent heartbeat within %s in %s",
			n.UUID, in.Config.CallbackTimeout, n.ProvisionState)
	}
	return ""
}

// lostLookup reports whether the agent looked up, was not heard from within
// its heartbeat timeout, and the wait is still within the call-back timeout:
// then the agent is booted again rather than the flow failed.
func lostLookup(in Input) bool {
	a, n := in.State.Agent, in.Node
	return !a.TokenIssued.IsZero() && a.LastHeartbeat.IsZero() && in.Now.Sub(a.TokenIssued) > in.Config.AgentHeartbeatTimeout &&
		(n.ProvisionUpdatedAt == nil || in.Now.Sub(n.ProvisionUpdatedAt.Time) <= in.Config.CallbackTimeout)
}

// rebootAgent boots the agent of a waiting node again, with the kernel
// arguments its flow booted it with; the wait goes on (its call-back
// timeout still runs from its start) and the new agent's lookup gets a
// new token (power wipes the old).
func rebootAgent(in Input, reason string) []Action {
	var args map[string]string
	if in.Node.ProvisionState == proto.StateInspectWait {
		args = inspectionArgs(in)
	}
	acts, err := startRamdisk(in, args)
	if err != nil {
		return fail(in, err.Error())
	}
	return append([]Action{History{Severity: "WARNING", Event: reason + "; booting the agent again"}}, acts...)
}

// fail ends the running flow in its failed state with last_error = msg, in
// one change, and records the failure in the history.
func fail(in Input, msg string) []Action {
	return []Action{
		Update{Move: state.EvFail, Force: true,
			Node: func(n *proto.Node) {
				n.LastError = &msg
				n.CleanStep, n.DeployStep = proto.Dict{}, proto.Dict{}
			},
			Flow: func(s *flowstate.State) {
				s.ClearFlow()
				s.Agent.TokenPregenerated = false
			}},
		History{Severity: "ERROR", Event: msg},
	}
}

// done ends the flow: its last arrow, with the flow's bookkeeping cleared.
func done(extra func(n *proto.Node)) Update {
	return Update{Move: state.EvDone, Node: func(n *proto.Node) {
		n.CleanStep, n.DeployStep = proto.Dict{}, proto.Dict{}
		if extra != nil {
			extra(n)
		}
	}, Flow: (*flowstate.State).ClearFlow}
}

// power changes the power state. A power change ends the running agent, so
// its identity is wiped first: the next agent must look up and get a fresh
// token, and nothing it did before can be mistaken for it.
func power(target proto.PowerState, onErr OnError) []Action {
	return []Action{Update{Flow: (*flowstate.State).WipeAgent}, SetPower{Target: target, OnError: onErr}}
}

// agentURL is the URL of the agent the last heartbeat described.
func agentURL(in Input) string { return in.State.Agent.URL }

// startRamdisk boots the agent: the boot interface prepares the ramdisk and
// the machine is rebooted (powered on if the BMC says it is off), as Ironic
// does; the caller then waits for its heartbeat. The recorded power state
// does not choose between the two: it is stale after a conductor died
// between a power-on and its record, and a "power on" of a machine already
// on would leave running the agent whose token power() wipes, refused
// until the call-back timeout.
func startRamdisk(in Input, kernelArgs map[string]string) ([]Action, error) {
	n := in.Node
	// A bad document would boot a host that never reaches us: refuse now.
	if _, err := driver.NetworkData(n); err != nil {
		return nil, fmt.Errorf("Cannot boot the agent ramdisk: %v", err)
	}
	args := map[string]string{"ipa-api-url": in.Config.APIURL}
	maps.Copy(args, kernelArgs)
	acts := []Action{PrepareRamdisk{KernelArgs: args, OnError: OnError{Prefix: "Failed to prepare node " + n.UUID + " to boot the agent ramdisk: "}}}
	return append(acts, power(proto.PowerRebooting, OnError{})...), nil
}

// bootRamdiskThenWait boots the agent and moves the node to its wait state.
func bootRamdiskThenWait(in Input, kernelArgs map[string]string, fn func(n *proto.Node, s *flowstate.State)) []Action {
	acts, err := startRamdisk(in, kernelArgs)
	if err != nil {
		return fail(in, err.Error())
	}
	return append(acts, enterWait(fn), Wake{At: in.Now.Add(in.Config.CallbackTimeout)})
}

// enterWait moves the node into its wait state with a fresh flow record.
func enterWait(fn func(n *proto.Node, s *flowstate.State)) Update {
	var node *proto.Node
	return Update{Move: state.EvWait,
		Node: func(n *proto.Node) { node = n },
		Flow: func(s *flowstate.State) {
			s.ResetPlan()
			s.HeartbeatPending = time.Time{}
			if fn != nil {
				fn(node, s)
			}
			s.Request = nil
		}}
}

// interrupted handles a flow a conductor left between two steps: a planned
// clean, deploy or service resumes; anything else cannot be resumed safely.
func interrupted(in Input) []Action {
	n := in.Node
	kinds := map[proto.ProvisionState]struct {
		kind proto.StepKind
		msg  string
	}{
		proto.StateCleaning:  {proto.StepClean, "Kiln conductor restarted while node %s was cleaning; cleaning was interrupted"},
		proto.StateDeploying: {proto.StepDeploy, "Kiln conductor restarted while node %s was deploying; the deployment was interrupted"},
		proto.StateServicing: {proto.StepService, "Kiln conductor restarted while node %s was servicing; servicing was interrupted"},
	}
	if k, ok := kinds[n.ProvisionState]; ok {
		if in.State.Steps != nil {
			return runSteps(in, k.kind, time.Time{})
		}
		return fail(in, fmt.Sprintf(k.msg, n.UUID))
	}
	return fail(in, fmt.Sprintf("Kiln conductor restarted while node %s was in %s; the operation was interrupted", n.UUID, n.ProvisionState))
}

// driverUnavailable: a flow fails; a stable node keeps the error and its
// pending requests are dropped (they cannot be carried out).
func driverUnavailable(in Input, err error) []Action {
	n := in.Node
	if state.IsTransient(n.ProvisionState) {
		return fail(in, fmt.Sprintf("Node %s: %v", n.UUID, err))
	}
	msg := err.Error()
	return []Action{Update{
		Node: func(n *proto.Node) { n.LastError = &msg; n.TargetPowerState = nil },
		Flow: func(s *flowstate.State) {
			s.Request, s.BootDevicePending = nil, false
			if s.ManagementRequest != nil {
				s.ManagementResult = &proto.ManagementResult{ID: s.ManagementRequest.ID, Error: msg}
				s.ManagementRequest = nil
			}
		},
	}}
}

// describe is the error of a failed action as the node's last_error tells it.
func describe(in Input, a Action, err error) string {
	switch a := a.(type) {
	case SetPower:
		return fmt.Sprintf("Failed to change power state to '%s' for node %s. Error: %v", a.Target, in.Node.UUID, err)
	}
	return err.Error()
}

// actionFailed decides what a failed action means: for most, the flow
// fails; an operator's power or boot-device request reports its error; an
// abort notes that powering off failed; verification records the BMC check.
func actionFailed(in Input, ev ActionFailed) []Action {
	n := in.Node
	msg := describe(in, ev.Action, ev.Err)
	switch a := ev.Action.(type) {
	case SetPower:
		if a.Operator {
			return []Action{
				History{Severity: "ERROR", Event: msg},
				Update{Node: func(n *proto.Node) { n.LastError = &msg; n.TargetPowerState = nil },
					Flow: func(s *flowstate.State) { s.PowerTimeout = 0 }},
			}
		}
		if isAbort(in) {
			return finishAbort(in, "; powering off failed: "+msg)
		}
	case SetBootDevice:
		if a.Operator {
			msg := fmt.Sprintf("Failed to set boot device %s for node %s. Error: %v", a.Device, n.UUID, ev.Err)
			return []Action{Update{Node: func(n *proto.Node) { n.LastError = &msg },
				Flow: func(s *flowstate.State) { s.BootDevicePending = false }}}
		}
	case Validate, ReadPower:
		if n.ProvisionState == proto.StateVerifying {
			check := proto.BMCCheck{At: in.Now, Operation: "verify", Error: secrets.Scrub(ev.Err.Error())}
			acts := []Action{Update{Flow: func(s *flowstate.State) { s.LastBMCCheck = &check }}}
			return append(acts, fail(in, ErrorRule(a).Prefix+msg)...)
		}
	}
	return fail(in, ErrorRule(ev.Action).Prefix+msg)
}
