package decide

import (
	"encoding/json"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/proto"
)

// Event is something that happened to a node: recorded by the API (a
// request, a heartbeat), noticed by the conductor (a timeout, a restart), or
// returned by an action (an agent's answer, a BMC's power state, a failure).
type Event interface{ isEvent() }

// Events the node's record holds (see Classify).
type (
	// OperatorRequest is a provision request the API recorded; the API has
	// already moved the node into the verb's first state.
	OperatorRequest struct{ Request flowstate.Request }
	// Heartbeat is an agent heartbeat the conductor has not acted on.
	Heartbeat struct{ At time.Time }
	// InventoryDelivered says the agent posted its inventory.
	InventoryDelivered struct{}
	// Timeout is an expired wait for the agent.
	// Reboot says the agent looked up and was never heard from, within
	// the call-back timeout: its lookup answer (its token) was lost, and
	// booting it again gets it a new one.
	Timeout struct {
		Reason string
		Reboot bool
	}
	// Interrupted is a flow a conductor left between two of its steps.
	Interrupted struct{}
	// PowerRequested is a pending PUT …/states/power.
	PowerRequested struct {
		Target  proto.PowerState
		Timeout time.Duration
	}
	// BootDeviceRequested is a pending boot-device change (recorded before
	// the API answered PUT …/boot_device synchronously).
	BootDeviceRequested struct {
		Device     string
		Persistent bool
	}
	// ManagementRequested is a boot-device call an API client waits on.
	ManagementRequested struct{ Request proto.ManagementRequest }
	// DriverUnavailable says the node's interfaces cannot be resolved.
	DriverUnavailable struct{ Err error }
	// BadState says the flow state does not decode.
	BadState struct{ Err error }
)

// Events actions return.
type (
	// PowerRead is the BMC's answer to ReadPower.
	PowerRead struct{ State proto.PowerState }
	// Inspected is the inspect interface's answer: a result, or Async when
	// the agent will deliver the inventory.
	Inspected struct {
		Result driver.InspectResult
		Async  bool
	}
	// InventoryRead is the stored inventory ReadInventory read, with the
	// inspection rules stored through the API (run with Config's).
	InventoryRead struct {
		Raw, Plugin json.RawMessage
		Rules       *inspectrules.Set
	}
	// AgentStepsListed is the agent's get_<kind>_steps answer.
	AgentStepsListed struct {
		Kind        proto.StepKind
		Result      proto.StepsResult
		Err         error
		HeartbeatAt time.Time
		// Refresh: the answer to AgentGetSteps{Refresh: true}.
		Refresh bool
	}
	// ImageArgsBuilt carries write_image's arguments, built by the executor
	// (rendering a config drive writes files), with the steps listed before.
	ImageArgsBuilt struct {
		Listed      AgentStepsListed
		Args        *proto.PrepareImageParams
		HeartbeatAt time.Time
	}
	// AgentCommandsRead is the agent's command list (the status of the step
	// it runs); Err when the agent could not be asked.
	AgentCommandsRead struct {
		Kind        proto.StepKind
		Commands    []proto.CommandResult
		Err         error
		HeartbeatAt time.Time
	}
	// ManagementAnswered is the BMC's answer to ManagementCall: the boot
	// device read (for a get), or Err.
	ManagementAnswered struct {
		Request proto.ManagementRequest
		Device  driver.BootDeviceState
		// Read is the rest of the answer: the indicators, an indicator's
		// state, or the boot mode and secure boot read back after a change.
		Read  ManagementRead
		Media []proto.VirtualMedia // a virtual media read's answer
		Err   error
	}
	// ActionFailed says Action returned Err; the actions after it were not
	// taken.
	ActionFailed struct {
		Action Action
		Err    error
	}
)

func (OperatorRequest) isEvent()     {}
func (Heartbeat) isEvent()           {}
func (InventoryDelivered) isEvent()  {}
func (Timeout) isEvent()             {}
func (Interrupted) isEvent()         {}
func (PowerRequested) isEvent()      {}
func (BootDeviceRequested) isEvent() {}
func (ManagementRequested) isEvent() {}
func (DriverUnavailable) isEvent()   {}
func (BadState) isEvent()            {}
func (PowerRead) isEvent()           {}
func (Inspected) isEvent()           {}
func (InventoryRead) isEvent()       {}
func (AgentStepsListed) isEvent()    {}
func (ImageArgsBuilt) isEvent()      {}
func (AgentCommandsRead) isEvent()   {}
func (ActionFailed) isEvent()        {}
func (ManagementAnswered) isEvent()  {}
