package decide

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Deploy: available → deploying → wait call-back (agent steps) → deploying
// (the conductor's own steps) → active, for the direct, custom-agent,
// ramdisk and fake deploy interfaces.

// deployable is an available node asked to deploy, with an image to write.
func deployable(t *testing.T) (*proto.Node, flowstate.State) {
	n, s := requested(t, proto.StateAvailable, proto.NoState, proto.VerbActive)
	n.InstanceInfo = proto.Dict{"image_source": "http://img/disk.raw", "image_checksum": strings.Repeat("ab", 32)}
	return n, s
}

func TestDirectDeployBootsTheAgentAndWaitsForIt(t *testing.T) {
	n, s := deployable(t)
	in := input(t, n, s, "direct")
	acts := Step(in, Classify(in))
	want(t, acts, "prepare ramdisk", "rebooting", "move wait")
	if args := find[PrepareRamdisk](t, acts).KernelArgs; args["ipa-api-url"] != testConfig.APIURL {
		t.Errorf("kernel args %v, want ipa-api-url %s", args, testConfig.APIURL)
	}
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateDeployWait, "")
	if got.DeployStep["step"] != "deploy" || fs.Request != nil || fs.Steps != nil {
		t.Errorf("deploy_step %v request %v plan %v: want the deploy step shown, the request taken, no plan yet", got.DeployStep, fs.Request, fs.Steps)
	}
}

func TestARunningMachineIsRebootedIntoTheAgent(t *testing.T) {
	n, s := deployable(t)
	on := proto.PowerOn
	n.PowerState = &on
	want(t, Step(input(t, n, s, "direct"), OperatorRequest{Request: *s.Request}), "prepare ramdisk", "rebooting", "move wait")
}

// A conductor killed after it powered a machine on for the agent, and
// before it recorded that, leaves the node recorded off with the agent
// running. The conductor that redoes the deploy must restart the machine:
// a "power on" would change nothing at the BMC, and the running agent,
// whose token the boot wipes, would have its heartbeats refused until the
// call-back timeout (the node stuck in the PostgreSQL kill run).
func TestAMachineRecordedOffIsStillRebootedIntoTheAgent(t *testing.T) {
	off, on := proto.PowerOff, proto.PowerOn
	for _, recorded := range []*proto.PowerState{nil, &off, &on} {
		n, s := deployable(t)
		n.PowerState = recorded
		s = withAgent(s) // the agent the dead conductor booted
		in := input(t, n, s, "direct")
		acts := Step(in, OperatorRequest{Request: *s.Request})
		want(t, acts, "prepare ramdisk", "rebooting", "move wait")
		if _, fs := after(t, in, acts); fs.Agent.Token != "" || fs.Agent.URL != "" {
			t.Errorf("recorded power %v: agent %+v kept across the reboot", recorded, fs.Agent)
		}
	}
}

func TestDirectDeployWithoutAnImageFailsBeforeBooting(t *testing.T) {
	n, s := requested(t, proto.StateAvailable, proto.NoState, proto.VerbActive)
	in := input(t, n, s, "direct")
	acts := Step(in, OperatorRequest{Request: *s.Request})
	want(t, acts, "move fail", "history ERROR")
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateDeployFailed, "Failed to validate deploy for node "+nodeID)
}

func TestBadNetworkDataFailsBeforeBooting(t *testing.T) {
	n, s := deployable(t)
	n.DriverInfo["preprovisioning_network_data"] = 42
	in := input(t, n, s, "direct")
	acts := Step(in, OperatorRequest{Request: *s.Request})
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateDeployFailed, "Cannot boot the agent ramdisk")
}

func TestTheAgentsFirstHeartbeatAsksForItsDeploySteps(t *testing.T) {
	n := node(proto.StateDeployWait, proto.StateActive)
	s := withAgent(flowstate.State{HeartbeatPending: t0})
	in := input(t, n, s, "direct")
	acts := Step(in, Classify(in))
	want(t, acts, "agent get deploy steps")
	if _, fs := after(t, in, acts); !fs.HeartbeatPending.IsZero() {
		t.Error("the heartbeat is still pending")
	}
}

func TestAHeartbeatWithoutAnAgentURLIsOnlyTaken(t *testing.T) {
	n := node(proto.StateDeployWait, proto.StateActive)
	in := input(t, n, flowstate.State{HeartbeatPending: t0}, "direct")
	acts := Step(in, Classify(in))
	want(t, acts)
	if _, fs := after(t, in, acts); !fs.HeartbeatPending.IsZero() {
		t.Error("the heartbeat is still pending")
	}
}

var agentDeploySteps = proto.StepsResult{Steps: map[string][]proto.Step{
	"GenericHardwareManager": {{Step: "erase_devices_metadata", Interface: "deploy", Priority: 0}, {Step: "write_image", Interface: "deploy", Priority: 0}},
}, HardwareManagerVersion: map[string]string{"generic_hardware_manager": "1.2"}}

func TestDirectDeployBuildsWriteImagesArgumentsBeforePlanning(t *testing.T) {
	n := node(proto.StateDeployWait, proto.StateActive)
	in := input(t, n, withAgent(flowstate.State{}), "direct")
	acts := Step(in, AgentStepsListed{Kind: proto.StepDeploy, Result: agentDeploySteps, HeartbeatAt: t0})
	want(t, acts, "build image args")
}

func TestThePlanRunsWriteImageOnTheAgentFirst(t *testing.T) {
	n := node(proto.StateDeployWait, proto.StateActive)
	in := input(t, n, withAgent(flowstate.State{}), "direct")
	image := &proto.PrepareImageParams{ImageInfo: proto.ImageInfo{ID: "img"}, Configdrive: json.RawMessage(`"drive"`)}
	listed := AgentStepsListed{Kind: proto.StepDeploy, Result: agentDeploySteps, HeartbeatAt: t0}
	acts := Step(in, ImageArgsBuilt{Listed: listed, Args: image, HeartbeatAt: t0})
	want(t, acts, "agent execute deploy.write_image")
	exec := find[AgentExecute](t, acts)
	if exec.Step.Image != image || exec.Versions["generic_hardware_manager"] != "1.2" || !exec.HeartbeatAt.Equal(t0) {
		t.Errorf("write_image sent with image %v versions %v heartbeat %v", exec.Step.Image, exec.Versions, exec.HeartbeatAt)
	}
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateDeployWait, "")
	var plan []string
	for _, s := range fs.Steps {
		plan = append(plan, stepLabel(s))
	}
	wantPlan := []string{"deploy.write_image", "deploy.prepare_instance_boot", "deploy.tear_down_agent", "deploy.switch_to_tenant_network", "deploy.boot_instance"}
	if !slices.Equal(plan, wantPlan) || !fs.StepSent || fs.StepIndex != 0 || fs.ImageArgs == nil || fs.ImageArgs.ImageInfo.ID != "img" {
		t.Errorf("plan %v sent %v index %d: want %v, the first sent with its image", plan, fs.StepSent, fs.StepIndex, wantPlan)
	}
	if got.DeployStep["args"].(proto.Dict)["configdrive"] != "******" {
		t.Errorf("deploy_step shows %v, want the config drive masked", got.DeployStep)
	}
}

// deploying is a node whose write_image the agent was given.
func deploying(t *testing.T, deployIface string) Input {
	n := node(proto.StateDeployWait, proto.StateActive)
	s := withAgent(flowstate.State{})
	s.Steps = buildDeploySteps(deployIface == "direct", nil, nil)
	s.StepSent = true
	return input(t, n, s, deployIface)
}

func succeeded(kind proto.StepKind, step proto.StepCall) []proto.CommandResult {
	res, _ := json.Marshal(proto.ExecuteStepResult{Kind: kind, Step: step})
	return []proto.CommandResult{
		{CommandName: "get_" + string(kind) + "_steps", CommandStatus: proto.CommandSucceeded},
		{CommandName: "execute_" + string(kind) + "_step", CommandStatus: proto.CommandSucceeded, CommandResult: res},
	}
}

func TestAHeartbeatDuringAStepAsksTheAgentForItsCommands(t *testing.T) {
	in := deploying(t, "direct")
	in.State.HeartbeatPending = t0
	want(t, Step(in, Classify(in)), "agent commands")
}

func TestWriteImageDoneRunsTheConductorsStepsToActive(t *testing.T) {
	in := deploying(t, "direct")
	acts := Step(in, AgentCommandsRead{Kind: proto.StepDeploy, Commands: succeeded(proto.StepDeploy, in.State.Steps[0])})
	want(t, acts,
		"move resume",
		"agent partition uuids", "agent install bootloader", "prepare instance", // prepare_instance_boot
		"agent power off", "power off", // tear_down_agent
		"power on", // boot_instance
		"move done")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateActive, "")
	if fs.Steps != nil || fs.Agent.URL != "" || fs.Agent.Token != "" || len(got.DeployStep) != 0 {
		t.Errorf("plan %v agent %+v deploy_step %v: want all forgotten", fs.Steps, fs.Agent, got.DeployStep)
	}
}

func TestAFailingConductorStepFailsTheDeployNamingTheStep(t *testing.T) {
	in := deploying(t, "direct")
	acts := Step(in, AgentCommandsRead{Kind: proto.StepDeploy, Commands: succeeded(proto.StepDeploy, in.State.Steps[0])})
	acts = Step(in, failedAt[PrepareInstance](t, acts, "no disk"))
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateDeployFailed, "Deploy step deploy.prepare_instance_boot failed on node "+nodeID+": no disk")
}

func TestAnOutOfBandStepRunsInTheConductorBetweenAgentSteps(t *testing.T) {
	in := deploying(t, "direct")
	bios := proto.StepCall{Step: proto.Step{Step: "apply_configuration", Interface: "bios", Priority: 90}}
	in.State.Steps = append([]proto.StepCall{bios}, in.State.Steps...)
	in.State.StepSent = false
	// Unknown to the node's interfaces, the step is the agent's.
	want(t, runSteps(in, proto.StepDeploy, t0), "agent execute bios.apply_configuration")

	in.DriverSteps = []proto.Step{bios.Step}
	acts := runSteps(in, proto.StepDeploy, t0)
	want(t, acts, "move resume", "driver step bios.apply_configuration", "move wait", "agent execute deploy.write_image")
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateDeployWait, "")
	got, _ = after(t, in, Step(in, failedAt[DriverStep](t, acts, "BIOS job failed")))
	wantState(t, got, proto.StateDeployFailed, "Deploy step bios.apply_configuration failed on node "+nodeID+": BIOS job failed")
}

func TestTheAgentsStepErrorFailsTheDeploy(t *testing.T) {
	in := deploying(t, "direct")
	cmds := []proto.CommandResult{{CommandName: "execute_deploy_step", CommandStatus: proto.CommandFailed, CommandError: &proto.CommandError{Type: "CommandExecutionError", Message: "disk on fire"}}}
	acts := Step(in, AgentCommandsRead{Kind: proto.StepDeploy, Commands: cmds})
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateDeployFailed, "Agent returned error for deploy step deploy.write_image on node "+nodeID)
	if fs.Steps != nil || fs.Agent.TokenPregenerated {
		t.Errorf("plan %v kept after failure", fs.Steps)
	}
}

func TestAnAgentThatRestartedMidStepFailsTheDeploy(t *testing.T) {
	in := deploying(t, "direct")
	cmds := []proto.CommandResult{{CommandName: "get_deploy_steps", CommandStatus: proto.CommandSucceeded}}
	got, _ := after(t, in, Step(in, AgentCommandsRead{Kind: proto.StepDeploy, Commands: cmds}))
	wantState(t, got, proto.StateDeployFailed, "the agent restarted while deploy step deploy.write_image was running")
}

func TestAnAgentThatCannotBeAskedIsWaitedFor(t *testing.T) {
	in := deploying(t, "direct")
	want(t, Step(in, AgentCommandsRead{Kind: proto.StepDeploy, Err: errString("connection refused")}))
}

func TestARunningStepsProgressIsRecordedOnlyWhenItChanges(t *testing.T) {
	in := deploying(t, "direct")
	res, _ := json.Marshal(proto.CommandProgressResult{Progress: proto.CommandProgress{BytesDone: 1024, BytesTotal: 4096, Stage: "write"}})
	cmds := []proto.CommandResult{{CommandName: "execute_deploy_step", CommandStatus: proto.CommandRunning, CommandResult: res}}
	acts := Step(in, AgentCommandsRead{Kind: proto.StepDeploy, Commands: cmds})
	_, fs := after(t, in, acts)
	if p := fs.Progress; p == nil || p.BytesDone != 1024 || p.Step != "deploy.write_image" || !p.UpdatedAt.Equal(t0) {
		t.Fatalf("progress %+v, want 1024/4096 of deploy.write_image at t0", p)
	}
	in.State = fs
	if acts := Step(in, AgentCommandsRead{Kind: proto.StepDeploy, Commands: cmds}); len(acts) != 0 {
		t.Errorf("same progress again: %d actions, want none", len(acts))
	}
}

func TestCustomAgentWithoutDeployStepsWarnsAndPlansNoImage(t *testing.T) {
	n, s := requested(t, proto.StateAvailable, proto.NoState, proto.VerbActive)
	in := input(t, n, s, "custom-agent")
	want(t, Step(in, OperatorRequest{Request: *s.Request}), "history WARNING", "prepare ramdisk", "rebooting", "move wait")
	plan, _ := Plan(input(t, node(proto.StateDeployWait, proto.StateActive), flowstate.State{}, "custom-agent"), proto.StepDeploy, agentSteps(agentDeploySteps))
	for _, s := range plan {
		if s.Step.Step == "write_image" {
			t.Errorf("custom-agent plan has write_image (priority %d); want it only when the operator asks", s.Priority)
		}
	}
}

func TestCustomAgentRunsTheOperatorsDeploySteps(t *testing.T) {
	n := node(proto.StateDeployWait, proto.StateActive)
	user := []proto.StepCall{{Step: proto.Step{Step: "write_image", Interface: "deploy", Priority: 85}, Args: map[string]any{"image_info": map[string]any{"id": "x"}}}}
	in := input(t, n, withAgent(flowstate.State{UserDeploySteps: user}), "custom-agent")
	acts := Step(in, AgentStepsListed{Kind: proto.StepDeploy, Result: agentDeploySteps})
	want(t, acts, "agent execute deploy.write_image")
	if exec := find[AgentExecute](t, acts); exec.Step.Priority != 85 || exec.Step.Image != nil {
		t.Errorf("sent %+v: want the operator's priority and arguments", exec.Step)
	}
}

// The executor merges the templates' steps with the operator's
// (templatesteps.Steps); the plan uses that list instead of the operator's.
func TestDeployTemplateStepsJoinThePlan(t *testing.T) {
	n := node(proto.StateDeployWait, proto.StateActive)
	user := []proto.StepCall{{Step: proto.Step{Step: "write_image", Interface: "deploy", Priority: 81}}}
	in := input(t, n, flowstate.State{UserDeploySteps: user}, "direct")
	in.DeploySteps = []proto.StepCall{
		{Step: proto.Step{Step: "apply_configuration", Interface: "bios", Priority: 90}},
		{Step: proto.Step{Step: "write_image", Interface: "deploy", Priority: 81}},
	}
	plan, err := Plan(in, proto.StepDeploy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stepLabel(plan[0]) != "bios.apply_configuration" || stepLabel(plan[1]) != "deploy.write_image" || plan[1].Priority != 81 {
		t.Errorf("plan starts %s(%d), %s(%d): want the template's bios step, then write_image at the operator's 81",
			stepLabel(plan[0]), plan[0].Priority, stepLabel(plan[1]), plan[1].Priority)
	}
}

// A template that cannot be applied (an instance trait the node lacks)
// fails the deploy when it is planned.
func TestDeployTemplateErrorFailsThePlan(t *testing.T) {
	n := node(proto.StateDeployWait, proto.StateActive)
	in := input(t, n, flowstate.State{}, "direct")
	in.TemplateErr = errors.New("Node is missing traits CUSTOM_X")
	if _, err := Plan(in, proto.StepDeploy, nil); err == nil || err.Error() != "Node is missing traits CUSTOM_X" {
		t.Fatalf("Plan: %v", err)
	}
}

func TestRamdiskDeployBootsTheRamdiskAsTheInstance(t *testing.T) {
	n, s := requested(t, proto.StateAvailable, proto.NoState, proto.VerbActive)
	in := input(t, n, s, "ramdisk")
	acts := Step(in, OperatorRequest{Request: *s.Request})
	want(t, acts, "prepare ramdisk", "rebooting", "move done")
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateActive, "")
}

func TestFakeDeployPowersOnAndIsActive(t *testing.T) {
	n, s := requested(t, proto.StateAvailable, proto.NoState, proto.VerbActive)
	in := input(t, n, s, "fake")
	acts := Step(in, OperatorRequest{Request: *s.Request})
	want(t, acts, "fake deploy", "power on", "move done")
	got, _ := after(t, in, Step(in, failedAt[FakeDeploy](t, acts, "configured failure")))
	wantState(t, got, proto.StateDeployFailed, "Deploy of node "+nodeID+" failed: configured failure")
}

func TestAFailedRebootNamesTheTargetAndTheNode(t *testing.T) {
	n, s := deployable(t)
	in := input(t, n, s, "direct")
	acts := Step(in, failedAt[SetPower](t, Step(in, OperatorRequest{Request: *s.Request}), "BMC busy"))
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateDeployFailed, "Failed to change power state to 'rebooting' for node "+nodeID+". Error: BMC busy")
}
