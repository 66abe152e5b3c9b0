package decide

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// stepKinds maps the states where steps run to their kind.
var stepKinds = map[proto.ProvisionState]proto.StepKind{
	proto.StateCleanWait: proto.StepClean, proto.StateDeployWait: proto.StepDeploy, proto.StateServiceWait: proto.StepService,
}

// workState is the state a kind's conductor-side work runs in.
var workState = map[proto.StepKind]proto.ProvisionState{
	proto.StepClean: proto.StateCleaning, proto.StepDeploy: proto.StateDeploying, proto.StepService: proto.StateServicing,
}

// heartbeat acts on an agent heartbeat: in a step flow it asks the agent
// for its steps (first heartbeat) or for the status of the running step;
// in rescue wait it finishes the rescue; in inspect wait it only notes it.
func heartbeat(in Input, at time.Time) []Action {
	// Only the heartbeat acted on is cleared: the executor may store this
	// change after reading the agent's commands (flows.go), and a newer
	// heartbeat recorded meanwhile must still wake the conductor.
	clear := Update{Flow: func(s *flowstate.State) {
		if s.HeartbeatPending.Equal(at) {
			s.HeartbeatPending = time.Time{}
		}
	}}
	if in.Node.ProvisionState == proto.StateRescueWait {
		return finishRescue(in)
	}
	kind, ok := stepKinds[in.Node.ProvisionState]
	if !ok {
		return []Action{clear}
	}
	// A running agent must heartbeat again within its timeout.
	acts := []Action{clear, Wake{At: at.Add(in.Config.AgentHeartbeatTimeout)}}
	if agentURL(in) == "" {
		return acts
	}
	s := in.State
	switch {
	case s.Steps == nil:
		// First heartbeat of a freshly booted agent: learn its steps.
		return append(acts, AgentGetSteps{Kind: kind, HeartbeatAt: at})
	case !s.StepSent && s.CachedStepsVersions == nil:
		// An agent booted in the middle of the plan (an out-of-band step
		// rebooted the machine, and the power change forgot the agent):
		// its steps and versions are learnt again, as Ironic refreshes
		// them after a step's reboot; the plan stays.
		return append(acts, AgentGetSteps{Kind: kind, HeartbeatAt: at, Refresh: true})
	case !s.StepSent || s.StepIndex >= len(s.Steps):
		return append(acts, runSteps(in, kind, at)...)
	}
	return append(acts, AgentCommands{Kind: kind, HeartbeatAt: at})
}

// stepsListed plans the flow from the agent's steps (a direct deploy first
// has write_image's arguments built).
func stepsListed(in Input, ev AgentStepsListed) []Action {
	n := in.Node
	if ev.Err != nil {
		return fail(in, fmt.Sprintf("Node %s: getting %s steps from the agent at %s failed: %v", n.UUID, ev.Kind, agentURL(in), ev.Err))
	}
	if ev.Refresh {
		record := func(s *flowstate.State) {
			s.SetCachedSteps(ev.Kind, ev.Result.Steps)
			s.CachedStepsVersions = ev.Result.HardwareManagerVersion
		}
		next := in
		record(&next.State)
		return append([]Action{Update{Flow: record}}, runSteps(next, ev.Kind, ev.HeartbeatAt)...)
	}
	if ev.Kind == proto.StepDeploy && in.Deploy.WritesImage {
		return []Action{BuildImageArgs{Listed: ev, OnError: OnError{Prefix: "Node " + n.UUID + ": "}}}
	}
	return planned(in, ev, nil, ev.HeartbeatAt)
}

// planned records the plan and runs it.
func planned(in Input, ev AgentStepsListed, image *proto.PrepareImageParams, hbAt time.Time) []Action {
	plan, err := Plan(in, ev.Kind, agentSteps(ev.Result))
	if err != nil {
		return fail(in, fmt.Sprintf("Node %s: %v", in.Node.UUID, err))
	}
	if plan == nil {
		plan = []proto.StepCall{} // planned, with nothing to run
	}
	record := func(s *flowstate.State) {
		s.SetCachedSteps(ev.Kind, ev.Result.Steps)
		s.CachedStepsVersions = ev.Result.HardwareManagerVersion
		s.Steps, s.StepIndex, s.StepSent = plan, 0, false
		s.ImageArgs = image
	}
	next := in
	record(&next.State)
	return append([]Action{Update{Flow: record}}, runSteps(next, ev.Kind, hbAt)...)
}

// commandsRead judges the running step by the agent's command list.
func commandsRead(in Input, ev AgentCommandsRead) []Action {
	n := in.Node
	if ev.Err != nil {
		// An agent that cannot be asked is waited for; the heartbeat
		// timeout fails the node if it stays silent.
		return nil
	}
	s := in.State
	idx := s.StepIndex
	if s.Steps == nil || idx >= len(s.Steps) {
		return runSteps(in, ev.Kind, ev.HeartbeatAt)
	}
	cur := withImageArgs(s.Steps[idx], s)
	st := agentclient.LastStepStatus(ev.Commands, ev.Kind, cur)
	switch st.State {
	case agentclient.StepWait:
		return recordProgress(in, cur, st.Command)
	case agentclient.StepFailed:
		return fail(in, fmt.Sprintf("Agent returned error for %s step %s on node %s: %s", ev.Kind, stepLabel(cur), n.UUID, st.Error))
	case agentclient.StepVersionMismatch:
		if ev.Kind == proto.StepClean && !isManualClean(n) {
			// Automated cleaning restarts with the agent's current steps.
			now := in.Now
			return []Action{
				History{Severity: "WARNING", Event: "agent hardware managers changed; restarting automated cleaning"},
				Update{Flow: func(s *flowstate.State) { s.ResetPlan(); s.HeartbeatPending = now }},
			}
		}
		return fail(in, fmt.Sprintf("Node %s: the agent's hardware managers changed during %s: %s", n.UUID, ev.Kind, st.Error))
	case agentclient.StepFresh:
		if !cur.RebootRequested {
			return fail(in, fmt.Sprintf("Node %s: the agent restarted while %s step %s was running", n.UUID, ev.Kind, stepLabel(cur)))
		}
	case agentclient.StepSucceeded:
	}
	var acts []Action
	if st.State == agentclient.StepSucceeded {
		raid, why := agentRAIDDone(n, cur, st.Result.Result, in.Now)
		if why != "" {
			return fail(in, fmt.Sprintf("Agent returned error for %s step %s on node %s: %s", ev.Kind, stepLabel(cur), n.UUID, why))
		}
		if raid != nil {
			acts = append(acts, Update{Node: raid})
		}
	}
	advance := func(s *flowstate.State) { s.StepIndex, s.StepSent = idx+1, false }
	next := in
	advance(&next.State)
	return append(append(acts, Update{Flow: advance}), runSteps(next, ev.Kind, ev.HeartbeatAt)...)
}

// runSteps runs the plan from the current step: the conductor's own steps
// run one after another, the next agent step goes to the agent (and the node
// waits for a heartbeat), and once all are done the flow finishes.
func runSteps(in Input, kind proto.StepKind, hbAt time.Time) []Action {
	s := in.State
	work := workState[kind]
	cur := in.Node.ProvisionState
	var acts []Action
	for idx := s.StepIndex; ; idx++ {
		if idx >= len(s.Steps) {
			return append(acts, finishSteps(in, kind, cur)...)
		}
		step := withImageArgs(s.Steps[idx], s)
		deployOwn := kind == proto.StepDeploy && isConductorStep(step)
		if deployOwn || isDriverStep(in, step) {
			// Out of band: the conductor runs it, the node in its work state.
			if cur != work {
				acts = append(acts, Update{Move: state.EvResume})
				cur = work
			}
			acts = append(acts, Update{Node: stepField(kind, stepDict(step))})
			next := idx + 1
			rebootsAgent := !deployOwn && step.RebootRequested && agentURL(in) != "" && next < len(s.Steps)
			onErr := OnError{Prefix: fmt.Sprintf("%s step %s failed on node %s: ", stepKindTitle[kind], stepLabel(step), in.Node.UUID)}
			if rebootsAgent {
				// The step's reboot must come back into the agent, as
				// Ironic's reboot_to_finish_step prepares the ramdisk boot
				// first: a network boot is set for one boot only.
				acts = append(acts, PrepareRamdisk{KernelArgs: map[string]string{"ipa-api-url": in.Config.APIURL}, OnError: onErr})
			}
			if deployOwn {
				acts = append(acts, conductorStep(in, step)...)
			} else {
				acts = append(acts, DriverStep{Step: step, OnError: onErr})
			}
			acts = append(acts, Update{Flow: func(s *flowstate.State) { s.StepIndex = next }})
			if rebootsAgent {
				// The step rebooted the machine, and the agent with it:
				// the agent's next heartbeat (after its lookup) runs the
				// next step.
				return append(acts, Update{Move: state.EvWait}, Wake{At: in.Now.Add(in.Config.CallbackTimeout)})
			}
			continue
		}
		// An agent step: hand it over and wait for the heartbeat that says it is done.
		versions := s.CachedStepsVersions
		if versions == nil {
			versions = map[string]string{}
		}
		if cur == work {
			// The node waits before the step goes out (the move is
			// stored with the commit that precedes the command): an
			// agent that finishes at once heartbeats into the wait,
			// which is acted on, not into the work state, where a
			// heartbeat is only recorded and the step's end would
			// wait for the agent's next periodic heartbeat.
			acts = append(acts, Update{Move: state.EvWait})
		}
		acts = append(acts, AgentExecute{Kind: kind, Step: step, Versions: versions, HeartbeatAt: hbAt,
			OnError: OnError{Prefix: fmt.Sprintf("Node %s: starting %s step %s on the agent at %s failed: ", in.Node.UUID, kind, stepLabel(step), agentURL(in))}})
		sent := Update{Node: stepField(kind, stepDict(step)), Flow: func(s *flowstate.State) { s.StepSent, s.StepSentAt = true, in.Now }}
		return append(acts, sent)
	}
}

// stepKindTitle names a kind of step at the start of a sentence.
var stepKindTitle = map[proto.StepKind]string{proto.StepClean: "Clean", proto.StepDeploy: "Deploy", proto.StepService: "Service"}

// stepField sets the node's clean_step, deploy_step or service_step.
func stepField(kind proto.StepKind, d proto.Dict) func(n *proto.Node) {
	return func(n *proto.Node) {
		switch kind {
		case proto.StepClean:
			n.CleanStep = d
		case proto.StepDeploy:
			n.DeployStep = d
		case proto.StepService:
			n.ServiceStep = d
		}
	}
}

// conductorStep is one of the deploy interface's own steps, run out of band.
func conductorStep(in Input, s proto.StepCall) []Action {
	onErr := OnError{Prefix: fmt.Sprintf("Deploy step %s failed on node %s: ", stepLabel(s), in.Node.UUID)}
	switch s.Step.Step {
	case "prepare_instance_boot":
		var acts []Action
		if in.Deploy.WritesImage {
			acts = append(acts, AgentPartitionUUIDs{})
			acts = append(acts, installBootloader(in, onErr)...)
		}
		// The boot interface makes the disk the boot device.
		acts = append(acts, PrepareInstance{OnError: onErr})
		return append(acts, secureBoot(in, true, onErr)...)
	case "tear_down_agent":
		var acts []Action
		if agentURL(in) != "" {
			acts = append(acts, AgentPowerOff{Timeout: tearDownAgentTimeout})
		}
		return append(acts, power(proto.PowerOff, onErr)...)
	case "switch_to_tenant_network":
		return nil
	case "boot_instance":
		return power(proto.PowerOn, onErr)
	}
	return []Action{DriverStep{Step: s, OnError: onErr}}
}

// finishSteps ends a flow whose steps all succeeded; cur is the node's
// provision state by then.
func finishSteps(in Input, kind proto.StepKind, cur proto.ProvisionState) []Action {
	n := in.Node
	var acts []Action
	switch kind {
	case proto.StepClean:
		if agentURL(in) != "" {
			acts = append(acts, AgentPowerOff{Timeout: finishAgentTimeout})
		}
		// Cleaning ends with the machine off, out-of-band steps or not.
		acts = append(acts, power(proto.PowerOff, OnError{Prefix: fmt.Sprintf("Failed to tear down cleaning on node %s: ", n.UUID)})...)
		if in.Deploy.Agent { // else out of band only: no ramdisk booted
			acts = append(acts, CleanUpRamdisk{OnError: OnError{Ignore: true}})
		}
		if hasHardwareCache(in) {
			// Ironic caches the BIOS settings (and firmware components)
			// once cleaning is done.
			acts = append(acts, RefreshHardware{})
		}
	case proto.StepService:
		if in.Deploy.Agent {
			acts = append(acts, bootInstance(in, OnError{Prefix: fmt.Sprintf("Failed to boot node %s back into its instance after servicing: ", n.UUID)})...)
		}
	}
	if waitStates[cur] {
		acts = append(acts, Update{Move: state.EvResume})
	}
	return append(acts, Update{Move: state.EvDone,
		Node: func(n *proto.Node) {
			n.CleanStep, n.DeployStep, n.ServiceStep = proto.Dict{}, proto.Dict{}, proto.Dict{}
		},
		Flow: func(s *flowstate.State) { s.ClearFlow(); s.ForgetAgent(); s.ForgetOperatorSteps() }})
}

// commandProgress reads the progress a RUNNING agent command reports in its
// command_result ({"progress": {...}}, a Kiln agent extension; IPA reports
// none and ok is false).
func commandProgress(cmd proto.CommandResult) (p proto.CommandProgress, ok bool) {
	if cmd.CommandStatus != proto.CommandRunning || len(cmd.CommandResult) == 0 {
		return p, false
	}
	var r struct {
		Progress *proto.CommandProgress `json:"progress"`
	}
	if err := json.Unmarshal(cmd.CommandResult, &r); err != nil || r.Progress == nil {
		return p, false
	}
	return *r.Progress, true
}

// recordProgress keeps the running step's progress, as the agent reported
// it, on the node (driver_internal_info.kiln_progress), where the API, the
// event stream and the metrics read it; nothing when it did not change.
func recordProgress(in Input, cur proto.StepCall, cmd proto.CommandResult) []Action {
	p, ok := commandProgress(cmd)
	if !ok {
		return nil
	}
	label := stepLabel(cur)
	if old := in.State.Progress; old != nil && old.Step == label && old.BytesDone == p.BytesDone &&
		old.BytesTotal == p.BytesTotal && old.Stage == p.Stage {
		return nil
	}
	at := proto.Time{Time: in.Now.UTC()}
	return []Action{Update{Flow: func(s *flowstate.State) {
		s.Progress = &flowstate.Progress{Step: label, BytesDone: p.BytesDone, BytesTotal: p.BytesTotal, Stage: p.Stage, UpdatedAt: &at}
	}}}
}
