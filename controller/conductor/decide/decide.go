// Package decide is the conductor's decision core, in the manner of etcd's
// raft: Step takes what is known of a node (its record, its typed flow
// state, the time) and one event, and returns the actions to take, as data.
// It does no I/O and reads no clock, so every rule of every flow is a table
// row in a test. The conductor's executor carries the actions out in order
// and feeds what they return (an agent's answer, a BMC's power state, a
// failure) back to Step as the next event.
package decide

import (
	"github.com/kilnhq/kiln/controller/inspectrules"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Config is the part of the conductor's configuration decisions depend on.
type Config struct {
	// APIURL is the controller URL agents are told to use (ipa-api-url).
	APIURL string
	// CallbackTimeout bounds the wait for an agent's first heartbeat.
	CallbackTimeout time.Duration
	// AgentHeartbeatTimeout is how long a running agent may stay silent.
	AgentHeartbeatTimeout time.Duration
	// InspectionRules run on every node whose in-band inspection finishes;
	// nil: none.
	InspectionRules *inspectrules.Set
}

// Input is what a decision sees. Node is read, never changed.
type Input struct {
	Node  *proto.Node
	State flowstate.State
	// Deploy is the node's deploy interface.
	Deploy driver.DeployInterface
	// DeploySteps, when not nil, are the operator's deploy_steps merged
	// with those of the deploy templates the node's instance traits select
	// (templatesteps.Steps, resolved by the executor); TemplateErr is why
	// they could not be, which fails the deploy when it is planned.
	DeploySteps []proto.StepCall
	TemplateErr error
	// DriverSteps are the steps the node's out-of-band interfaces (bios,
	// raid, firmware, management) offer; the executor fills them from the
	// node's interfaces. They join the plans like the agent's steps and
	// run in the conductor (DriverStep), not in the agent.
	DriverSteps []proto.Step
	Now         time.Time
	Config      Config
}

// Step is the decision: what to do about ev, given in.
func Step(in Input, ev Event) []Action {
	switch ev := ev.(type) {
	case OperatorRequest:
		return startFlow(in, ev.Request)
	case Timeout:
		if ev.Reboot {
			return rebootAgent(in, ev.Reason)
		}
		return fail(in, ev.Reason)
	case Heartbeat:
		return heartbeat(in, ev.At)
	case InventoryDelivered:
		return []Action{ReadInventory{OnError: OnError{Prefix: "Inspection of node " + in.Node.UUID + ": reading the stored inventory: "}}}
	case Interrupted:
		return interrupted(in)
	case PowerRequested:
		return operatorPower(in, ev)
	case BootDeviceRequested:
		return []Action{
			SetBootDevice{Device: ev.Device, Persistent: ev.Persistent, Operator: true},
			Update{Flow: func(s *flowstate.State) { s.BootDevicePending = false }},
		}
	case ManagementRequested:
		return []Action{ManagementCall{Request: ev.Request}}
	case ManagementAnswered:
		return managementAnswered(in, ev)
	case DriverUnavailable:
		return driverUnavailable(in, ev.Err)
	case BadState:
		return fail(in, "Node "+in.Node.UUID+": unreadable flow state: "+ev.Err.Error())
	case PowerRead:
		return powerRead(in, ev.State)
	case Inspected:
		return inspected(in, ev)
	case InventoryRead:
		return inventoryRead(in, ev)
	case AgentStepsListed:
		return stepsListed(in, ev)
	case ImageArgsBuilt:
		return planned(in, ev.Listed, ev.Args, ev.HeartbeatAt)
	case AgentCommandsRead:
		return commandsRead(in, ev)
	case ActionFailed:
		return actionFailed(in, ev)
	}
	return nil
}

// Classify names the event a node's record holds for its conductor: a
// recorded request, an expired wait, a pending heartbeat or inventory, a flow
// interrupted by a restart, a pending power or boot-device change. It is nil
// when there is nothing to do.
func Classify(in Input) Event {
	n, s := in.Node, in.State
	if s.Request != nil {
		return OperatorRequest{Request: *s.Request}
	}
	if reason := TimeoutReason(in); reason != "" {
		return Timeout{Reason: reason, Reboot: lostLookup(in)}
	}
	switch n.ProvisionState {
	case proto.StateCleanWait, proto.StateDeployWait, proto.StateServiceWait, proto.StateRescueWait:
		if !s.HeartbeatPending.IsZero() {
			return Heartbeat{At: s.HeartbeatPending}
		}
	case proto.StateInspectWait:
		if s.InspectionPending {
			return InventoryDelivered{}
		}
		if !s.HeartbeatPending.IsZero() {
			return Heartbeat{At: s.HeartbeatPending}
		}
	default:
		if isTransient(n.ProvisionState) {
			return Interrupted{}
		}
	}
	if s.ManagementRequest != nil {
		// A client waits for this answer: it goes before a power change.
		return ManagementRequested{Request: *s.ManagementRequest}
	}
	if n.TargetPowerState != nil {
		return PowerRequested{Target: *n.TargetPowerState, Timeout: time.Duration(s.PowerTimeout) * time.Second}
	}
	if s.BootDevicePending {
		ev := BootDeviceRequested{}
		if s.BootDevice != nil {
			ev.Device, ev.Persistent = s.BootDevice.Device, s.BootDevice.Persistent
		}
		return ev
	}
	return nil
}
