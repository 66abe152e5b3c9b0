package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// Clean: automated (manageable → cleaning → available, on provide or after
// undeploy) and manual (manageable → cleaning → manageable, with the
// operator's clean_steps).

var agentCleanSteps = proto.StepsResult{Steps: map[string][]proto.Step{
	"GenericHardwareManager": {
		{Step: "erase_devices_metadata", Interface: "deploy", Priority: 99},
		{Step: "erase_devices", Interface: "deploy", Priority: 10},
		{Step: "burnin_cpu", Interface: "deploy", Priority: 0},
	},
}}

func TestAutomatedCleaningBootsTheAgent(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbProvide)
	in := input(t, n, s, "direct")
	acts := Step(in, Classify(in))
	want(t, acts, "prepare ramdisk", "rebooting", "move wait")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateCleanWait, "")
	if fs.ManualCleanSteps != nil {
		t.Errorf("manual steps %v recorded for automated cleaning", fs.ManualCleanSteps)
	}
}

func TestAutomatedCleaningOffGoesStraightToAvailable(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbProvide)
	off := false
	n.AutomatedClean = &off
	in := input(t, n, s, "direct")
	acts := Step(in, OperatorRequest{Request: *s.Request})
	want(t, acts, "move done")
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateAvailable, "")
}

func TestCleaningWithoutAnAgentRunsTheFakeDelay(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbProvide)
	want(t, Step(input(t, n, s, "fake"), OperatorRequest{Request: *s.Request}), "fake deploy", "move done")
}

func TestAutomatedCleaningRunsTheAgentsPrioritisedStepsHighestFirst(t *testing.T) {
	n := node(proto.StateCleanWait, proto.StateAvailable)
	in := input(t, n, withAgent(flowstate.State{}), "direct")
	acts := Step(in, AgentStepsListed{Kind: proto.StepClean, Result: agentCleanSteps})
	want(t, acts, "agent execute deploy.erase_devices_metadata")
	got, fs := after(t, in, acts)
	var plan []string
	for _, s := range fs.Steps {
		plan = append(plan, stepLabel(s))
	}
	if !slices.Equal(plan, []string{"deploy.erase_devices_metadata", "deploy.erase_devices"}) {
		t.Errorf("plan %v, want the steps with a priority, highest first", plan)
	}
	if got.CleanStep["step"] != "erase_devices_metadata" {
		t.Errorf("clean_step %v", got.CleanStep)
	}
}

func TestManualCleaningRunsTheOperatorsStepsInOrder(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbClean)
	steps := []proto.StepCall{{Step: proto.Step{Step: "burnin_cpu", Interface: "deploy"}}, {Step: proto.Step{Step: "erase_devices", Interface: "deploy"}}}
	s.Request.CleanSteps = steps
	in := input(t, n, s, "direct")
	acts := Step(in, OperatorRequest{Request: *s.Request})
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateCleanWait, "")
	if len(fs.ManualCleanSteps) != 2 {
		t.Fatalf("manual steps %v, want the two asked for", fs.ManualCleanSteps)
	}
	in = input(t, got, withAgent(fs), "direct")
	acts = Step(in, AgentStepsListed{Kind: proto.StepClean, Result: agentCleanSteps})
	want(t, acts, "agent execute deploy.burnin_cpu")
}

func TestManualCleaningFailsOnAStepTheAgentDoesNotOffer(t *testing.T) {
	n := node(proto.StateCleanWait, proto.StateManageable)
	s := withAgent(flowstate.State{ManualCleanSteps: []proto.StepCall{{Step: proto.Step{Step: "frobnicate", Interface: "raid"}}}})
	in := input(t, n, s, "direct")
	got, _ := after(t, in, Step(in, AgentStepsListed{Kind: proto.StepClean, Result: agentCleanSteps}))
	wantState(t, got, proto.StateCleanFailed, "the requested clean step raid.frobnicate is not offered by the agent")
}

func TestAnAgentThatCannotListItsStepsFailsCleaning(t *testing.T) {
	n := node(proto.StateCleanWait, proto.StateAvailable)
	in := input(t, n, withAgent(flowstate.State{}), "direct")
	got, _ := after(t, in, Step(in, AgentStepsListed{Kind: proto.StepClean, Err: errString("EOF")}))
	wantState(t, got, proto.StateCleanFailed, "getting clean steps from the agent at http://192.0.2.10:9999 failed: EOF")
}

// cleaningLast is a node whose last clean step the agent was given.
func cleaningLast(t *testing.T, target proto.ProvisionState) Input {
	n := node(proto.StateCleanWait, target)
	s := withAgent(flowstate.State{Steps: []proto.StepCall{{Step: agentCleanSteps.Steps["GenericHardwareManager"][0]}}, StepSent: true})
	return input(t, n, s, "direct")
}

func TestCleaningEndsWithTheMachineOffAndTheAgentForgotten(t *testing.T) {
	for _, target := range []proto.ProvisionState{proto.StateAvailable, proto.StateManageable} {
		t.Run(string(target), func(t *testing.T) {
			in := cleaningLast(t, target)
			acts := Step(in, AgentCommandsRead{Kind: proto.StepClean, Commands: succeeded(proto.StepClean, in.State.Steps[0])})
			want(t, acts, "agent power off", "power off", "clean up ramdisk", "move resume", "move done")
			got, fs := after(t, in, acts)
			wantState(t, got, target, "")
			if fs.Agent.URL != "" || fs.Steps != nil || len(got.CleanStep) != 0 {
				t.Errorf("agent %+v plan %v clean_step %v: want all forgotten", fs.Agent, fs.Steps, got.CleanStep)
			}
		})
	}
}

func TestCleaningFailsWhenTheMachineDoesNotPowerOffAtTheEnd(t *testing.T) {
	in := cleaningLast(t, proto.StateAvailable)
	acts := Step(in, AgentCommandsRead{Kind: proto.StepClean, Commands: succeeded(proto.StepClean, in.State.Steps[0])})
	got, _ := after(t, in, Step(in, failedAt[SetPower](t, acts, "stuck")))
	wantState(t, got, proto.StateCleanFailed, "Failed to tear down cleaning on node "+nodeID)
}

func TestChangedHardwareManagersRestartAutomatedCleaning(t *testing.T) {
	in := cleaningLast(t, proto.StateAvailable)
	cmds := []proto.CommandResult{{CommandName: "execute_clean_step", CommandStatus: proto.CommandCleanVersionMismatch}}
	acts := Step(in, AgentCommandsRead{Kind: proto.StepClean, Commands: cmds})
	want(t, acts, "history WARNING")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateCleanWait, "")
	if fs.Steps != nil || !fs.HeartbeatPending.Equal(t0) {
		t.Errorf("plan %v heartbeat %v: want the plan dropped and a heartbeat pending now, to plan again", fs.Steps, fs.HeartbeatPending)
	}
}

func TestChangedHardwareManagersFailManualCleaning(t *testing.T) {
	in := cleaningLast(t, proto.StateManageable)
	cmds := []proto.CommandResult{{CommandName: "execute_clean_step", CommandStatus: proto.CommandCleanVersionMismatch}}
	got, _ := after(t, in, Step(in, AgentCommandsRead{Kind: proto.StepClean, Commands: cmds}))
	wantState(t, got, proto.StateCleanFailed, "hardware managers changed during clean")
}

func TestUndeployPowersOffThenCleans(t *testing.T) {
	n, s := requested(t, proto.StateActive, proto.NoState, proto.VerbDeleted)
	n.InstanceInfo = proto.Dict{"image_source": "http://img"}
	in := input(t, n, s, "direct")
	acts := Step(in, OperatorRequest{Request: *s.Request})
	want(t, acts, "power off", "clean up ramdisk", "move clean")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateCleaning, "")
	if len(got.InstanceInfo) != 0 || fs.Request == nil {
		t.Fatalf("instance_info %v request %v: want it emptied and the request kept for cleaning", got.InstanceInfo, fs.Request)
	}
	// The next decision is the cleaning: automated, to available.
	in = input(t, got, fs, "direct")
	acts = Step(in, Classify(in))
	want(t, acts, "prepare ramdisk", "rebooting", "move wait")
	if got, _ := after(t, in, acts); *got.TargetProvisionState != proto.StateAvailable {
		t.Errorf("target %s, want available", *got.TargetProvisionState)
	}
}

func TestAFlowLeftBetweenStepsResumesItsPlanOrFails(t *testing.T) {
	n := node(proto.StateCleaning, proto.StateAvailable)
	planned := withAgent(flowstate.State{Steps: []proto.StepCall{{Step: agentCleanSteps.Steps["GenericHardwareManager"][1]}}})
	in := input(t, n, planned, "direct")
	if ev := Classify(in); ev != (Interrupted{}) {
		t.Fatalf("event %#v, want Interrupted", ev)
	}
	want(t, Step(in, Interrupted{}), "move wait", "agent execute deploy.erase_devices")
	in = input(t, n, flowstate.State{}, "direct")
	got, _ := after(t, in, Step(in, Interrupted{}))
	wantState(t, got, proto.StateCleanFailed, "Kiln conductor restarted while node "+nodeID+" was cleaning")
}

func TestManualCleaningRunsTheDriversOwnStepsOutOfBand(t *testing.T) {
	n := node(proto.StateCleanWait, proto.StateManageable)
	raid := proto.Step{Step: "create_configuration", Interface: "raid"}
	s := withAgent(flowstate.State{ManualCleanSteps: []proto.StepCall{{Step: raid}, {Step: proto.Step{Step: "erase_devices", Interface: "deploy"}}}})
	in := input(t, n, s, "direct")
	in.DriverSteps = []proto.Step{raid}
	acts := Step(in, AgentStepsListed{Kind: proto.StepClean, Result: agentCleanSteps})
	want(t, acts, "move resume", "driver step raid.create_configuration", "move wait", "agent execute deploy.erase_devices")
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateCleanWait, "")
	if got.CleanStep["step"] != "erase_devices" {
		t.Errorf("clean_step %v, want the agent's step once sent", got.CleanStep)
	}
	got, _ = after(t, in, Step(in, failedAt[DriverStep](t, acts, "controller busy")))
	wantState(t, got, proto.StateCleanFailed, "Clean step raid.create_configuration failed on node "+nodeID+": controller busy")
}

// The executor may store a heartbeat's "taken" note after it has read the
// agent's commands, so the note clears only the heartbeat acted on: one
// the API recorded meanwhile stays pending and wakes the conductor again.
func TestTakingAHeartbeatKeepsANewerOne(t *testing.T) {
	step := proto.StepCall{Step: proto.Step{Step: "erase_devices_metadata", Interface: "deploy", Priority: 99}}
	for _, tc := range []struct {
		name    string
		stored  time.Time // HeartbeatPending when the change is stored
		pending time.Time // want after
	}{
		{"the heartbeat acted on", t0, time.Time{}},
		{"a newer heartbeat", t0.Add(time.Second), t0.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node(proto.StateCleanWait, proto.StateAvailable)
			s := withAgent(flowstate.State{HeartbeatPending: t0, Steps: []proto.StepCall{step}, StepSent: true})
			in := input(t, n, s, "direct")
			acts := Step(in, Classify(in))
			want(t, acts, "agent commands")
			stored := in
			stored.State.HeartbeatPending = tc.stored
			if _, fs := after(t, stored, acts); !fs.HeartbeatPending.Equal(tc.pending) {
				t.Errorf("pending heartbeat %v, want %v", fs.HeartbeatPending, tc.pending)
			}
		})
	}
}

// An agent step that follows an out-of-band step goes out with the node
// already waiting: the heartbeat of an agent that finishes it at once is
// acted on (a heartbeat in cleaning or deploying is only recorded, and
// the step's end would wait for the agent's next periodic heartbeat).
func TestAnAgentStepAfterADriverStepGoesOutWithTheNodeWaiting(t *testing.T) {
	for _, tc := range []struct {
		kind       proto.StepKind
		wait, goal proto.ProvisionState
		driver     proto.Step
		agent      string
	}{
		{proto.StepClean, proto.StateCleanWait, proto.StateManageable, proto.Step{Step: "create_configuration", Interface: "raid"}, "erase_devices"},
		{proto.StepDeploy, proto.StateDeployWait, proto.StateActive, proto.Step{Step: "apply_configuration", Interface: "bios"}, "write_image"},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			n := node(tc.wait, tc.goal)
			s := withAgent(flowstate.State{Steps: []proto.StepCall{{Step: tc.driver}, {Step: proto.Step{Step: tc.agent, Interface: "deploy"}}}, StepSent: true})
			in := input(t, n, s, "direct")
			in.DriverSteps = []proto.Step{tc.driver}
			acts := runSteps(in, tc.kind, t0)
			i := slices.IndexFunc(acts, func(a Action) bool { _, ok := a.(AgentExecute); return ok })
			if i < 0 {
				t.Fatalf("no agent command in %q", words(acts))
			}
			// What the executor stores before the command goes out.
			got, _ := after(t, in, acts[:i])
			if got.ProvisionState != tc.wait {
				t.Fatalf("stored when the step goes out: %s, want %s", got.ProvisionState, tc.wait)
			}
			if a := state.Heartbeat(got.ProvisionState, false, false); a != state.HeartbeatAct {
				t.Errorf("a heartbeat then is %v, want acted on", a)
			}
		})
	}
}
