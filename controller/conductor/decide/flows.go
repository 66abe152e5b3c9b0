package decide

import (
	"fmt"
	"github.com/kilnhq/kiln/controller/inspection"
	"github.com/kilnhq/kiln/controller/inspectrules"
	"strings"
	"time"

	"github.com/kilnhq/kiln/controller/deploy"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// How long the agent is given to power the machine off itself.
const (
	abortAgentTimeout    = 10 * time.Second
	finishAgentTimeout   = 10 * time.Second
	tearDownAgentTimeout = 30 * time.Second
)

func isManualClean(n *proto.Node) bool {
	return n.TargetProvisionState != nil && *n.TargetProvisionState == proto.StateManageable
}

// startCleaning begins automated (target available) or manual (target
// manageable) cleaning.
func startCleaning(in Input, req flowstate.Request) []Action {
	n := in.Node
	manual := isManualClean(n)
	skip := !manual && n.AutomatedClean != nil && !*n.AutomatedClean
	// Secure boot goes off before anything boots, as Ironic's redfish
	// boot interface turns it off for cleaning.
	acts := secureBoot(in, false, OnError{Prefix: fmt.Sprintf("Cleaning of node %s failed: ", n.UUID)})
	if manual && !in.Deploy.Agent && hasDriverStep(in, req.CleanSteps) {
		return append(acts, outOfBand(in, proto.StepClean, req.CleanSteps)...)
	}
	if skip || !in.Deploy.Agent {
		// Nothing to run in-band: automated cleaning is off, or the deploy
		// interface has no agent (fake).
		if !skip {
			acts = append(acts, FakeDeploy{OnError: OnError{Prefix: fmt.Sprintf("Cleaning of node %s failed: ", n.UUID)}})
		}
		return append(acts, done(nil))
	}
	var steps []proto.StepCall
	if manual {
		steps = req.CleanSteps
	}
	return append(acts, bootRamdiskThenWait(in, nil, func(_ *proto.Node, s *flowstate.State) { s.ManualCleanSteps = steps })...)
}

// startDeploy begins deploy or rebuild.
func startDeploy(in Input, req flowstate.Request) []Action {
	n := in.Node
	d := in.Deploy
	if d.WritesImage {
		if _, err := deploy.ImageInfo(n); err != nil {
			return fail(in, fmt.Sprintf("Failed to validate deploy for node %s: %v", n.UUID, err))
		}
	}
	if d.RamdiskInstance {
		acts, err := startRamdisk(in, nil)
		if err != nil {
			return fail(in, err.Error())
		}
		// The ramdisk is the instance: secure boot goes on before it boots.
		acts = append(secureBoot(in, true, OnError{Prefix: fmt.Sprintf("Deploy of node %s failed: ", n.UUID)}), acts...)
		return append(acts, done(nil))
	}
	if !d.Agent {
		// fake: the instance is "deployed" after the configured delay.
		acts := []Action{FakeDeploy{OnError: OnError{Prefix: fmt.Sprintf("Deploy of node %s failed: ", n.UUID)}}}
		acts = append(acts, power(proto.PowerOn, OnError{})...)
		return append(acts, done(nil))
	}
	user := req.DeploySteps
	var acts []Action
	if d.WantsDeploySteps && len(user) == 0 {
		acts = append(acts, History{Severity: "WARNING", Event: d.Name + " deploy without deploy_steps: only the instance boot runs"})
	}
	return append(acts, bootRamdiskThenWait(in, nil, func(n *proto.Node, s *flowstate.State) {
		n.DeployStep = proto.Dict{"interface": "deploy", "step": "deploy", "priority": 100, "args": proto.Dict{}}
		s.UserDeploySteps = user
	})...)
}

// startDelete tears an instance down (undeploy) and moves on to automated
// cleaning; the request stays recorded, so cleaning starts next (or after
// a restart).
func startDelete(in Input) []Action {
	onErr := OnError{Prefix: fmt.Sprintf("Error while tearing down node %s: ", in.Node.UUID)}
	acts := power(proto.PowerOff, onErr)
	acts = append(acts,
		CleanUpRamdisk{OnError: onErr},
		Update{Move: state.EvClean,
			Node: func(n *proto.Node) { n.InstanceInfo = proto.Dict{}; n.InstanceUUID, n.AllocationUUID = nil, nil },
			Flow: func(s *flowstate.State) { s.PartitionUUIDs = nil }},
	)
	if held := in.Node.AllocationUUID; held != nil {
		// The instance's allocation ends with it, as in Ironic.
		acts = append(acts, EndAllocation{ID: *held})
	}
	return acts
}

// startInspection runs the inspect interface; its answer is Inspected.
func startInspection(in Input) []Action {
	onErr := OnError{Prefix: fmt.Sprintf("Failed to inspect node %s: ", in.Node.UUID)}
	return []Action{Validate{Interface: "inspect", OnError: onErr}, Inspect{OnError: onErr}}
}

// inspected finishes out-of-band inspection, or boots the agent to inspect
// in band and waits for its inventory.
func inspected(in Input, ev Inspected) []Action {
	if !ev.Async {
		now := proto.Time{Time: in.Now.UTC()}
		return []Action{
			CreatePorts{MACs: ev.Result.MACs},
			done(func(n *proto.Node) {
				for k, v := range ev.Result.Properties {
					n.Properties[k] = v
				}
				started, finished := now, now
				n.InspectionStartedAt, n.InspectionFinishedAt = &started, &finished
			}),
		}
	}
	args := inspectionArgs(in)
	now := proto.Time{Time: in.Now.UTC()}
	// Forget an inventory of an earlier inspection before the machine
	// boots: a fast agent posts its own before the wait is recorded, and
	// the API accepts it while the node is inspecting.
	forget := Update{Flow: func(s *flowstate.State) { s.InspectionPending = false }}
	return append([]Action{forget}, bootRamdiskThenWait(in, args, func(n *proto.Node, s *flowstate.State) {
		n.InspectionStartedAt = &now
		n.InspectionFinishedAt = nil
	})...)
}

// inventoryRead applies the inventory the agent delivered: ports for its
// PXE interface, properties for scheduling, then powers the machine off.
func inventoryRead(in Input, ev InventoryRead) []Action {
	n := in.Node
	sum, err := inspection.Summarize(ev.Raw)
	if err != nil {
		return fail(in, fmt.Sprintf("Inspection of node %s: %v", n.UUID, err))
	}
	props, macs, pxe := sum.Properties, sum.MACs, sum.PXE
	ruled, ruleActs, err := applyInspectionRules(in, props, ev)
	if err != nil {
		return fail(in, fmt.Sprintf("Inspection of node %s: %v", n.UUID, err))
	}
	now := proto.Time{Time: in.Now.UTC()}
	acts := append(ruleActs, CreatePorts{MACs: macs, PXE: pxe})
	acts = append(acts, power(proto.PowerOff, OnError{})...)
	return append(acts,
		CleanUpRamdisk{OnError: OnError{Ignore: true}},
		Update{Move: state.EvResume},
		Update{Move: state.EvDone,
			Node: func(n *proto.Node) {
				for k, v := range props {
					n.Properties[k] = v
				}
				if ruled != nil {
					inspectrules.CopySettable(n, ruled)
				}
				n.InspectionFinishedAt = &now
				n.CleanStep, n.DeployStep = proto.Dict{}, proto.Dict{}
			},
			Flow: func(s *flowstate.State) { s.ClearFlow(); s.ForgetAgent() }},
	)
}

// startService boots the agent on an active node to run service steps.
func startService(in Input, req flowstate.Request) []Action {
	n := in.Node
	steps := req.ServiceSteps
	if len(steps) == 0 {
		return fail(in, fmt.Sprintf("Node %s: servicing needs service_steps", n.UUID))
	}
	if !in.Deploy.Agent && hasDriverStep(in, steps) {
		return outOfBand(in, proto.StepService, steps)
	}
	if !in.Deploy.Agent {
		return []Action{FakeDeploy{OnError: OnError{Prefix: fmt.Sprintf("Servicing of node %s failed: ", n.UUID)}}, done(nil)}
	}
	return bootRamdiskThenWait(in, nil, func(_ *proto.Node, s *flowstate.State) { s.ServiceSteps = steps })
}

// inspectionArgs are the kernel arguments of an in-band inspection's agent.
func inspectionArgs(in Input) map[string]string {
	return map[string]string{"ipa-inspection-callback-url": strings.TrimSuffix(in.Config.APIURL, "/") + "/v1/continue_inspection"}
}

// startRescue boots the agent on an active node as a rescue system.
func startRescue(in Input) []Action {
	n := in.Node
	if pw, _ := n.InstanceInfo["rescue_password"].(string); pw == "" {
		return fail(in, fmt.Sprintf("Node %s: rescue needs a rescue_password", n.UUID))
	}
	if !in.Deploy.Agent {
		return []Action{done(nil)}
	}
	return bootRamdiskThenWait(in, nil, nil)
}

// finishRescue hands the rescue password to the agent on its first
// heartbeat: rescue wait → rescue.
func finishRescue(in Input) []Action {
	n := in.Node
	pw, _ := n.InstanceInfo["rescue_password"].(string)
	return []Action{
		Update{Flow: func(s *flowstate.State) { s.HeartbeatPending = time.Time{} }},
		AgentFinalizeRescue{Password: pw, OnError: OnError{Prefix: fmt.Sprintf("Node %s: the agent at %s could not finalize rescue: ", n.UUID, agentURL(in))}},
		Update{Move: state.EvResume},
		done(nil),
	}
}

// unrescue boots a rescued node back into its instance.
func unrescue(in Input) []Action {
	var acts []Action
	if in.Deploy.Agent {
		acts = bootInstance(in, OnError{Prefix: fmt.Sprintf("Failed to unrescue node %s: ", in.Node.UUID)})
	}
	return append(acts, Update{Move: state.EvDone,
		Node: func(n *proto.Node) {
			delete(n.InstanceInfo, "rescue_password")
			n.CleanStep, n.DeployStep = proto.Dict{}, proto.Dict{}
		},
		Flow: func(s *flowstate.State) { s.ClearFlow(); s.ForgetAgent() }})
}

// bootInstance leaves the ramdisk for the deployed instance: power off,
// boot from disk (the boot interface sets it), power on.
func bootInstance(in Input, onErr OnError) []Action {
	var acts []Action
	if agentURL(in) != "" {
		acts = append(acts, AgentPowerOff{Timeout: finishAgentTimeout})
	}
	acts = append(acts, power(proto.PowerOff, onErr)...)
	acts = append(acts, CleanUpRamdisk{OnError: onErr}, PrepareInstance{OnError: onErr})
	acts = append(acts, secureBoot(in, true, onErr)...)
	return append(acts, power(proto.PowerOn, onErr)...)
}
