package conductor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/deploy"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// usesAgent reports whether the node's deploy interface does its work through
// the ramdisk agent (and so cleaning and deploying boot it).
func (f *flow) usesAgent() bool {
	switch f.ifs.Deploy {
	case "direct", "custom-agent":
		return true
	}
	return false
}

// startRamdisk boots the agent: boot interface prepares the ramdisk, the
// machine is (re)started, and the node waits for the agent's first heartbeat.
func (f *flow) startRamdisk(ctx context.Context, kernelArgs map[string]string) error {
	n := f.n
	// A bad document would boot a host that never reaches us: refuse now.
	if _, err := driver.NetworkData(n); err != nil {
		return fmt.Errorf("Cannot boot the agent ramdisk: %v", err)
	}
	args := map[string]string{"ipa-api-url": f.c.cfg.APIURL}
	for k, v := range kernelArgs {
		args[k] = v
	}
	params := driver.RamdiskParams{KernelArgs: args}
	if carrier, ok := f.ifs.Boot.(driver.AgentTokenCarrier); ok && carrier.CarriesAgentToken(n) {
		// A virtual-media ISO carries its token: an agent booted from it
		// cannot be told apart by MAC lookups on a shared network, so it
		// gets the token on its kernel command line (Ironic does the same).
		params.AgentToken = agentclient.NewToken()
		if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) {
			s.Agent.Token, s.Agent.TokenPregenerated = params.AgentToken, true
		}); err != nil {
			return err
		}
		n = f.n
	}
	if err := f.ifs.Boot.PrepareRamdisk(ctx, n, params); err != nil {
		return fmt.Errorf("Failed to prepare node %s to boot the agent ramdisk: %v", n.UUID, err)
	}
	target := proto.PowerRebooting
	if n.PowerState == nil || *n.PowerState != proto.PowerOn {
		target = proto.PowerOn
	}
	if err := f.setPower(ctx, target, 0); err != nil {
		return err
	}
	return nil
}

// enterWait moves the node into its wait state with a fresh flow record.
func (f *flow) enterWait(ctx context.Context, fn func(n *proto.Node, s *flowstate.State)) error {
	return f.transition(ctx, state.EvWait, func(n *proto.Node) {
		flowstate.Update(n, func(s *flowstate.State) {
			s.ResetPlan()
			s.HeartbeatPending = time.Time{}
			if fn != nil {
				fn(n, s)
			}
			s.Request = nil
		})
	})
}

// startCleaning begins automated (target available) or manual (target
// manageable) cleaning.
func (f *flow) startCleaning(ctx context.Context, req flowstate.Request) error {
	n := f.n
	manual := n.TargetProvisionState != nil && *n.TargetProvisionState == proto.StateManageable
	manualSteps := req.CleanSteps
	skip := !manual && n.AutomatedClean != nil && !*n.AutomatedClean
	if err := f.setSecureBoot(ctx, false); err != nil {
		return f.fail(ctx, fmt.Sprintf("Cleaning of node %s failed: %v", n.UUID, err))
	}
	if manual && !f.usesAgent() && hasDriverStep(n, manualSteps) {
		return f.runOutOfBand(ctx, proto.StepClean, manualSteps)
	}
	if skip || !f.usesAgent() {
		// Nothing to run in-band: automated cleaning is off, or the deploy
		// interface has no agent (fake).
		if !skip {
			if err := driver.FakeDeploy(ctx, n); err != nil {
				return f.fail(ctx, fmt.Sprintf("Cleaning of node %s failed: %v", n.UUID, err))
			}
		}
		return f.transition(ctx, state.EvDone, func(n *proto.Node) { clearFlow(n) })
	}
	if err := f.startRamdisk(ctx, nil); err != nil {
		return f.fail(ctx, err.Error())
	}
	return f.enterWait(ctx, func(_ *proto.Node, s *flowstate.State) {
		s.ManualCleanSteps = nil
		if manual {
			s.ManualCleanSteps = manualSteps
		}
	})
}

// startDeploy begins deploy or rebuild.
func (f *flow) startDeploy(ctx context.Context, req flowstate.Request) error {
	n := f.n
	switch f.ifs.Deploy {
	case "direct":
		if _, err := deploy.ImageInfo(n); err != nil {
			return f.fail(ctx, fmt.Sprintf("Failed to validate deploy for node %s: %v", n.UUID, err))
		}
	case "custom-agent":
	case "ramdisk":
		if err := f.setSecureBoot(ctx, true); err != nil {
			return f.fail(ctx, err.Error())
		}
		if err := f.startRamdisk(ctx, nil); err != nil {
			return f.fail(ctx, err.Error())
		}
		return f.transition(ctx, state.EvDone, func(n *proto.Node) { clearFlow(n) })
	default:
		// fake: the instance is "deployed" after the configured delay.
		if err := driver.FakeDeploy(ctx, n); err != nil {
			return f.fail(ctx, fmt.Sprintf("Deploy of node %s failed: %v", n.UUID, err))
		}
		if err := f.setPower(ctx, proto.PowerOn, 0); err != nil {
			return f.fail(ctx, err.Error())
		}
		return f.transition(ctx, state.EvDone, func(n *proto.Node) { clearFlow(n) })
	}
	user := req.DeploySteps
	if f.ifs.Deploy == "custom-agent" && len(user) == 0 {
		f.history(ctx, "WARNING", "custom-agent deploy without deploy_steps: only the instance boot runs")
	}
	if err := f.startRamdisk(ctx, nil); err != nil {
		return f.fail(ctx, err.Error())
	}
	return f.enterWait(ctx, func(n *proto.Node, s *flowstate.State) {
		n.DeployStep = proto.Dict{"interface": "deploy", "step": "deploy", "priority": 100, "args": proto.Dict{}}
		s.UserDeploySteps = user
	})
}

// startDelete tears an instance down (undeploy), then cleans automatically.
func (f *flow) startDelete(ctx context.Context) error {
	n := f.n
	if err := f.setPower(ctx, proto.PowerOff, 0); err != nil {
		return f.fail(ctx, fmt.Sprintf("Error while tearing down node %s: %v", n.UUID, err))
	}
	if err := f.ifs.Boot.CleanUpRamdisk(ctx, n); err != nil {
		return f.fail(ctx, fmt.Sprintf("Error while tearing down node %s: %v", n.UUID, err))
	}
	if err := f.transition(ctx, state.EvClean, func(n *proto.Node) {
		n.InstanceInfo = proto.Dict{}
		n.InstanceUUID = nil
		flowstate.Update(n, func(s *flowstate.State) { s.PartitionUUIDs = nil })
	}); err != nil {
		return err
	}
	return f.startCleaning(ctx, flowstate.Request{Verb: "clean"})
}

// startInspection runs the inspect interface; in-band inspection boots the
// agent and waits for its inventory.
func (f *flow) startInspection(ctx context.Context) error {
	n := f.n
	if err := f.ifs.Inspect.Validate(ctx, n); err != nil {
		return f.fail(ctx, fmt.Sprintf("Failed to inspect node %s: %v", n.UUID, err))
	}
	res, async, err := f.ifs.Inspect.Inspect(ctx, n)
	if err != nil {
		return f.fail(ctx, fmt.Sprintf("Failed to inspect node %s: %v", n.UUID, err))
	}
	if !async {
		if err := f.createPorts(ctx, res.MACs, ""); err != nil {
			return f.fail(ctx, err.Error())
		}
		return f.transition(ctx, state.EvDone, func(n *proto.Node) {
			for k, v := range res.Properties {
				n.Properties[k] = v
			}
			n.InspectionStartedAt, n.InspectionFinishedAt = proto.Now(), proto.Now()
			clearFlow(n)
		})
	}
	args := map[string]string{"ipa-inspection-callback-url": strings.TrimSuffix(f.c.cfg.APIURL, "/") + "/v1/continue_inspection"}
	if err := f.startRamdisk(ctx, args); err != nil {
		return f.fail(ctx, err.Error())
	}
	return f.enterWait(ctx, func(n *proto.Node, s *flowstate.State) {
		n.InspectionStartedAt = proto.Now()
		n.InspectionFinishedAt = nil
		s.InspectionPending = false
	})
}

// finishInspection applies the inventory the agent delivered: ports for its
// PXE interface, properties for scheduling, then powers the machine off.
func (f *flow) finishInspection(ctx context.Context) error {
	n := f.n
	raw, plugin, err := f.c.st.GetInventory(ctx, n.UUID)
	if err != nil {
		return f.fail(ctx, fmt.Sprintf("Inspection of node %s: reading the stored inventory: %v", n.UUID, err))
	}
	props, macs, pxe, err := summarizeInventory(raw, plugin)
	if err != nil {
		return f.fail(ctx, fmt.Sprintf("Inspection of node %s: %v", n.UUID, err))
	}
	if err := f.createPorts(ctx, macs, pxe); err != nil {
		return f.fail(ctx, err.Error())
	}
	if err := f.setPower(ctx, proto.PowerOff, 0); err != nil {
		return f.fail(ctx, err.Error())
	}
	_ = f.ifs.Boot.CleanUpRamdisk(ctx, n)
	if err := f.transition(ctx, state.EvResume, nil); err != nil {
		return err
	}
	return f.transition(ctx, state.EvDone, func(n *proto.Node) {
		for k, v := range props {
			n.Properties[k] = v
		}
		n.InspectionFinishedAt = proto.Now()
		clearFlow(n)
		forgetAgent(n)
	})
}

// abortCleanup finishes an abort the API recorded: the node is already in its
// failed state; stop the agent and power the machine off.
func (f *flow) abortCleanup(ctx context.Context) error {
	n := f.n
	if u := agentOf(n); u.URL != "" && f.c.cfg.Agent != nil {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = f.c.cfg.Agent.PowerOff(actx, u)
		cancel()
	}
	err := f.setPower(ctx, proto.PowerOff, 0)
	_ = f.ifs.Boot.CleanUpRamdisk(ctx, n)
	return f.update(ctx, func(n *proto.Node) {
		var from proto.ProvisionState
		if fs, _ := flowstate.Of(n); fs.Request != nil {
			from = fs.Request.From
		}
		msg := state.AbortedReason(from)
		if err != nil {
			msg += "; powering off failed: " + err.Error()
		}
		n.LastError = &msg
		clearFlow(n)
	})
}

// continueSteps acts on an agent heartbeat in clean wait or wait call-back.
func (f *flow) continueSteps(ctx context.Context, kind proto.StepKind) error {
	n := f.n
	fs, _ := flowstate.Of(n)
	hbAt := fs.HeartbeatPending
	if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) { s.HeartbeatPending = time.Time{} }); err != nil {
		return err
	}
	n = f.n
	ag := agentOf(n)
	if ag.URL == "" || f.c.cfg.Agent == nil {
		return nil
	}
	fs, _ = flowstate.Of(n)
	steps := fs.Steps
	if steps == nil {
		// First heartbeat of a freshly booted agent: learn its steps and plan.
		res, err := f.c.cfg.Agent.GetSteps(ctx, ag, kind, nodeForAgent(n), f.portsNoErr(ctx))
		if err != nil {
			return f.fail(ctx, fmt.Sprintf("Node %s: getting %s steps from the agent at %s failed: %v", n.UUID, kind, ag.URL, err))
		}
		plan, image, err := f.plan(kind, agentSteps(res))
		if err != nil {
			return f.fail(ctx, fmt.Sprintf("Node %s: %v", n.UUID, err))
		}
		if plan == nil {
			plan = []proto.StepCall{} // planned, with nothing to run
		}
		if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) {
			s.SetCachedSteps(kind, res.Steps)
			s.CachedStepsVersions = res.HardwareManagerVersion
			s.Steps, s.StepIndex, s.StepSent = plan, 0, false
			s.ImageArgs = image
		}); err != nil {
			return err
		}
		return f.runSteps(ctx, kind, hbAt)
	}
	idx, sent := fs.StepIndex, fs.StepSent
	if !sent && fs.CachedStepsVersions == nil {
		if err := f.refreshAgentSteps(ctx, kind); err != nil {
			return err
		}
	}
	if !sent || idx >= len(steps) {
		return f.runSteps(ctx, kind, hbAt)
	}
	cmds, err := f.c.cfg.Agent.Commands(ctx, ag)
	if err != nil {
		// An agent that cannot be asked is waited for; the heartbeat
		// timeout fails the node if it stays silent.
		f.c.log.Warn("read agent commands", "node", n.UUID, "agent", ag.URL, "err", err)
		return nil
	}
	cur := withImageArgs(steps[idx], fs)
	st := agentclient.LastStepStatus(cmds, kind, cur)
	switch st.State {
	case agentclient.StepWait:
		return f.recordProgress(ctx, cur, st.Command)
	case agentclient.StepFailed:
		return f.fail(ctx, fmt.Sprintf("Agent returned error for %s step %s on node %s: %s", kind, stepLabel(cur), n.UUID, st.Error))
	case agentclient.StepVersionMismatch:
		if kind == proto.StepClean && !isManualClean(n) {
			// Automated cleaning restarts with the agent's current steps.
			f.history(ctx, "WARNING", "agent hardware managers changed; restarting automated cleaning")
			return f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) {
				s.ResetPlan()
				s.HeartbeatPending = time.Now()
			})
		}
		return f.fail(ctx, fmt.Sprintf("Node %s: the agent's hardware managers changed during %s: %s", n.UUID, kind, st.Error))
	case agentclient.StepFresh:
		if !cur.RebootRequested {
			return f.fail(ctx, fmt.Sprintf("Node %s: the agent restarted while %s step %s was running", n.UUID, kind, stepLabel(cur)))
		}
	case agentclient.StepSucceeded:
	}
	if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) {
		s.StepIndex, s.StepSent = idx+1, false
	}); err != nil {
		return err
	}
	return f.runSteps(ctx, kind, hbAt)
}

func (f *flow) portsNoErr(ctx context.Context) []*proto.Port {
	p, err := f.portsForAgent(ctx)
	if err != nil {
		f.c.log.Warn("list ports", "node", f.n.UUID, "err", err)
	}
	if p == nil {
		p = []*proto.Port{}
	}
	return p
}

func isManualClean(n *proto.Node) bool {
	return n.TargetProvisionState != nil && *n.TargetProvisionState == proto.StateManageable
}

// plan builds the step list of a flow once the agent's steps are known, and
// for a direct deploy write_image's arguments.
func (f *flow) plan(kind proto.StepKind, agent []proto.Step) ([]proto.StepCall, *proto.PrepareImageParams, error) {
	n := f.n
	fs, err := flowstate.Of(n)
	if err != nil {
		return nil, nil, err
	}
	agent = append(agent, driverSteps(n)...) // out of band, hwsteps.go
	if kind == proto.StepService {
		steps, err := buildCleanSteps(agent, fs.ServiceSteps, true)
		return steps, nil, err
	}
	if kind == proto.StepClean {
		steps, err := buildCleanSteps(agent, fs.ManualCleanSteps, isManualClean(n))
		return steps, nil, err
	}
	var args *proto.PrepareImageParams
	if f.ifs.Deploy == "direct" {
		if args, err = imageArgs(n); err != nil {
			return nil, nil, err
		}
	}
	return buildDeploySteps(f.ifs.Deploy, agent, fs.UserDeploySteps), args, nil
}

// imageArgs are write_image's arguments for n: what to write and the
// rendered config drive.
func imageArgs(n *proto.Node) (*proto.PrepareImageParams, error) {
	info, err := deploy.ImageInfo(n)
	if err != nil {
		return nil, err
	}
	cd, err := configDriveFor(n)
	if err != nil {
		return nil, fmt.Errorf("building the config drive: %w", err)
	}
	args := &proto.PrepareImageParams{ImageInfo: info}
	if cd != "" {
		if args.Configdrive, err = json.Marshal(cd); err != nil {
			return nil, err
		}
	}
	return args, nil
}

// withImageArgs gives write_image its arguments from the flow state, unless
// the operator's deploy_steps gave it some.
func withImageArgs(s proto.StepCall, fs flowstate.State) proto.StepCall {
	if s.Interface == "deploy" && s.Step.Step == "write_image" && s.Args == nil && fs.ImageArgs != nil {
		s.Image = fs.ImageArgs
	}
	return s
}

func stepLabel(s proto.StepCall) string { return s.Interface + "." + s.Step.Step }

func stepDict(s proto.StepCall) proto.Dict {
	args := proto.Dict{}
	for k, v := range s.Args {
		if k == "configdrive" {
			v = "******"
		}
		args[k] = v
	}
	if s.Image != nil {
		args["image_info"] = s.Image.ImageInfo
		if len(s.Image.Configdrive) > 0 {
			args["configdrive"] = "******"
		}
	}
	return proto.Dict{"interface": s.Interface, "step": s.Step.Step, "priority": s.Priority, "args": args}
}

// runSteps executes the plan from the current index: conductor steps run
// here, the next agent step is handed to the agent (and the node waits for a
// heartbeat), and once all are done the flow finishes.
func (f *flow) runSteps(ctx context.Context, kind proto.StepKind, heartbeatAt time.Time) error {
	fs, err := flowstate.Of(f.n)
	if err != nil {
		return f.fail(ctx, fmt.Sprintf("Node %s: %v", f.n.UUID, err))
	}
	steps := fs.Steps
	work := map[proto.StepKind]proto.ProvisionState{
		proto.StepClean: proto.StateCleaning, proto.StepDeploy: proto.StateDeploying, proto.StepService: proto.StateServicing,
	}[kind]
	for {
		fs, _ := flowstate.Of(f.n)
		idx := fs.StepIndex
		if idx >= len(steps) {
			return f.finishSteps(ctx, kind)
		}
		cur := withImageArgs(steps[idx], fs)
		if isDriverStep(f.n, cur) {
			if stop, err := f.driverStep(ctx, kind, cur); stop || err != nil {
				return err
			}
			continue
		}
		if kind == proto.StepDeploy && isConductorStep(cur) {
			if f.n.ProvisionState != work {
				if err := f.transition(ctx, state.EvResume, nil); err != nil {
					return err
				}
			}
			if err := f.update(ctx, func(n *proto.Node) { n.DeployStep = stepDict(cur) }); err != nil {
				return err
			}
			if err := f.conductorStep(ctx, cur); err != nil {
				return f.fail(ctx, fmt.Sprintf("Deploy step %s failed on node %s: %v", stepLabel(cur), f.n.UUID, err))
			}
			if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) { s.StepIndex = idx + 1 }); err != nil {
				return err
			}
			continue
		}
		// An agent step: hand it over and wait for the heartbeat that says it is done.
		versions := fs.CachedStepsVersions
		if versions == nil {
			versions = map[string]string{}
		}
		ag := agentOf(f.n)
		_, err := f.c.cfg.Agent.ExecuteStep(ctx, ag, kind, cur, nodeForAgent(f.n), f.portsNoErr(ctx), versions)
		if !heartbeatAt.IsZero() {
			f.c.lat.add(time.Since(heartbeatAt))
			heartbeatAt = time.Time{}
		}
		if err != nil {
			return f.fail(ctx, fmt.Sprintf("Node %s: starting %s step %s on the agent at %s failed: %v", f.n.UUID, kind, stepLabel(cur), ag.URL, err))
		}
		return f.update(ctx, func(n *proto.Node) {
			if n.ProvisionState == work {
				_ = move(n, state.EvWait)
			}
			flowstate.Update(n, func(s *flowstate.State) { s.StepSent, s.StepSentAt = true, time.Now() })
			switch kind {
			case proto.StepClean:
				n.CleanStep = stepDict(cur)
			case proto.StepDeploy:
				n.DeployStep = stepDict(cur)
			case proto.StepService:
				n.ServiceStep = stepDict(cur)
			}
		})
	}
}

// conductorStep runs one of the deploy interface's own steps.
func (f *flow) conductorStep(ctx context.Context, s proto.StepCall) error {
	n := f.n
	switch s.Step.Step {
	case "prepare_instance_boot":
		if f.ifs.Deploy == "direct" {
			if uuids, err := f.c.cfg.Agent.GetPartitionUUIDs(ctx, agentOf(n)); err == nil {
				_ = f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) { s.PartitionUUIDs = &uuids })
			} else {
				f.c.log.Warn("get partition UUIDs", "node", n.UUID, "err", err)
			}
		}
		if err := f.ifs.Boot.PrepareInstance(ctx, f.n); err != nil {
			return err
		}
		if err := f.setSecureBoot(ctx, true); err != nil {
			return err
		}
		return f.ifs.Management.SetBootDevice(ctx, f.n, "disk", true)
	case "tear_down_agent":
		if ag := agentOf(n); ag.URL != "" {
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := f.c.cfg.Agent.PowerOff(actx, ag)
			cancel()
			if err != nil {
				f.c.log.Info("agent power off failed; powering off through the BMC", "node", n.UUID, "err", err)
			}
		}
		return f.setPower(ctx, proto.PowerOff, 0)
	case "switch_to_tenant_network":
		return nil
	case "boot_instance":
		return f.setPower(ctx, proto.PowerOn, 0)
	}
	return fmt.Errorf("unknown conductor step %s", stepLabel(s))
}

// finishSteps ends a clean or deploy flow whose steps all succeeded.
func (f *flow) finishSteps(ctx context.Context, kind proto.StepKind) error {
	n := f.n
	if kind == proto.StepClean {
		if ag := agentOf(n); ag.URL != "" {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_ = f.c.cfg.Agent.PowerOff(actx, ag)
			cancel()
		}
		if err := f.setPower(ctx, proto.PowerOff, 0); err != nil {
			return f.fail(ctx, fmt.Sprintf("Failed to tear down cleaning on node %s: %v", n.UUID, err))
		}
		_ = f.ifs.Boot.CleanUpRamdisk(ctx, f.n)
		f.cacheBIOS(ctx)
		f.cacheFirmware(ctx, nil)
	}
	if kind == proto.StepService {
		if err := f.bootInstance(ctx); err != nil {
			return f.fail(ctx, fmt.Sprintf("Failed to boot node %s back into its instance after servicing: %v", n.UUID, err))
		}
	}
	if waitStates[f.n.ProvisionState] {
		if err := f.transition(ctx, state.EvResume, nil); err != nil {
			return err
		}
	}
	return f.transition(ctx, state.EvDone, func(n *proto.Node) {
		clearFlow(n)
		forgetAgent(n)
		flowstate.Update(n, (*flowstate.State).ForgetOperatorSteps)
		n.ServiceStep = proto.Dict{}
	})
}

// bootInstance leaves the ramdisk for the deployed instance: power off, boot
// from disk, power on.
func (f *flow) bootInstance(ctx context.Context) error {
	if ag := agentOf(f.n); ag.URL != "" {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = f.c.cfg.Agent.PowerOff(actx, ag)
		cancel()
	}
	if err := f.setPower(ctx, proto.PowerOff, 0); err != nil {
		return err
	}
	if err := f.ifs.Boot.CleanUpRamdisk(ctx, f.n); err != nil {
		return err
	}
	if err := f.ifs.Boot.PrepareInstance(ctx, f.n); err != nil {
		return err
	}
	if err := f.setSecureBoot(ctx, true); err != nil {
		return err
	}
	if err := f.ifs.Management.SetBootDevice(ctx, f.n, "disk", true); err != nil {
		return err
	}
	return f.setPower(ctx, proto.PowerOn, 0)
}

// startService boots the agent on an active node to run service steps.
func (f *flow) startService(ctx context.Context, req flowstate.Request) error {
	n := f.n
	steps := req.ServiceSteps
	if len(steps) == 0 {
		return f.fail(ctx, fmt.Sprintf("Node %s: servicing needs service_steps", n.UUID))
	}
	if !f.usesAgent() && hasDriverStep(n, steps) {
		return f.runOutOfBand(ctx, proto.StepService, steps)
	}
	if !f.usesAgent() {
		if err := driver.FakeDeploy(ctx, n); err != nil {
			return f.fail(ctx, fmt.Sprintf("Servicing of node %s failed: %v", n.UUID, err))
		}
		return f.transition(ctx, state.EvDone, func(n *proto.Node) { clearFlow(n) })
	}
	if err := f.startRamdisk(ctx, nil); err != nil {
		return f.fail(ctx, err.Error())
	}
	return f.enterWait(ctx, func(_ *proto.Node, s *flowstate.State) { s.ServiceSteps = steps })
}

// startRescue boots the agent on an active node as a rescue system.
func (f *flow) startRescue(ctx context.Context) error {
	n := f.n
	if pw, _ := n.InstanceInfo["rescue_password"].(string); pw == "" {
		return f.fail(ctx, fmt.Sprintf("Node %s: rescue needs a rescue_password", n.UUID))
	}
	if !f.usesAgent() {
		return f.transition(ctx, state.EvDone, func(n *proto.Node) { clearFlow(n) })
	}
	if err := f.startRamdisk(ctx, nil); err != nil {
		return f.fail(ctx, err.Error())
	}
	return f.enterWait(ctx, nil)
}

// finishRescue hands the rescue password to the agent on its first
// heartbeat: rescue wait → rescue.
func (f *flow) finishRescue(ctx context.Context) error {
	n := f.n
	if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) { s.HeartbeatPending = time.Time{} }); err != nil {
		return err
	}
	ag := agentOf(n)
	pw, _ := n.InstanceInfo["rescue_password"].(string)
	if err := f.c.cfg.Agent.FinalizeRescue(ctx, ag, pw, false); err != nil {
		return f.fail(ctx, fmt.Sprintf("Node %s: the agent at %s could not finalize rescue: %v", n.UUID, ag.URL, err))
	}
	if err := f.transition(ctx, state.EvResume, nil); err != nil {
		return err
	}
	return f.transition(ctx, state.EvDone, func(n *proto.Node) { clearFlow(n) })
}

// unrescue boots a rescued node back into its instance.
func (f *flow) unrescue(ctx context.Context) error {
	if f.usesAgent() {
		if err := f.bootInstance(ctx); err != nil {
			return f.fail(ctx, fmt.Sprintf("Failed to unrescue node %s: %v", f.n.UUID, err))
		}
	}
	return f.transition(ctx, state.EvDone, func(n *proto.Node) {
		delete(n.InstanceInfo, "rescue_password")
		clearFlow(n)
		forgetAgent(n)
	})
}
