package decide

import (
	"encoding/json"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// Action is one thing for the executor to do. Actions run in order; the
// first that fails ends the list (unless its OnError says Ignore) and comes
// back as ActionFailed. An action that returns something (ReadPower,
// Inspect, AgentGetSteps…) is last in its list; its answer is the next
// event.
type Action interface{ isAction() }

// OnError says what a failing action means: the flow fails with Prefix
// followed by the error, or, with Ignore, the error is logged and the next
// action runs (best-effort clean-up).
type OnError struct {
	Prefix string
	Ignore bool
}

// Update is one committed change of the node: the state-machine arrow Move
// (if any), then Node's and Flow's edits, in one write. Force applies the
// edits even when Move is refused, so that a failure stays visible.
type Update struct {
	Move  state.Event
	Node  func(n *proto.Node)
	Flow  func(s *flowstate.State)
	Force bool
}

// History records an event in the node's history (scrubbed of secrets).
type History struct{ Severity, Event string }

// SetPower drives the machine to Target through the BMC and, on success,
// records the resulting power state. Operator marks a PUT …/states/power,
// whose failure is reported, not a flow failure.
type SetPower struct {
	Target   proto.PowerState
	Timeout  time.Duration
	Operator bool
	OnError  OnError
}

// SetBootDevice sets the next boot device through the BMC.
type SetBootDevice struct {
	Device     string
	Persistent bool
	Operator   bool
	OnError    OnError
}

// PrepareRamdisk has the boot interface ready the agent ramdisk with these
// kernel arguments (a boot medium that carries the agent token gets a fresh
// one, recorded first).
type PrepareRamdisk struct {
	KernelArgs map[string]string
	OnError    OnError
}

// CleanUpRamdisk removes what PrepareRamdisk set up.
type CleanUpRamdisk struct{ OnError OnError }

// PrepareInstance has the boot interface boot the deployed instance.
type PrepareInstance struct{ OnError OnError }

// Validate runs an interface's Validate (which may ask the BMC).
type Validate struct {
	Interface string // power, boot or inspect
	OnError   OnError
}

// ReadPower reads the power state from the BMC; the answer is PowerRead.
type ReadPower struct{ OnError OnError }

// Inspect runs the inspect interface; the answer is Inspected.
type Inspect struct{ OnError OnError }

// ReadInventory reads the inventory the agent posted; the answer is
// InventoryRead.
type ReadInventory struct{ OnError OnError }

// EndAllocation deletes the allocation a torn-down instance held (if it
// still names the node).
type EndAllocation struct{ ID string }

// StoreInventory replaces the stored inspection data (the inspection
// rules changed the plugin data).
type StoreInventory struct{ Raw, Plugin json.RawMessage }

// CreatePorts adds a port for each MAC the node lacks; PXE marks the
// PXE-enabled one (empty: all are).
type CreatePorts struct {
	MACs    []string
	PXE     string
	OnError OnError
}

// FakeDeploy is the fake deploy interface's work (its configured delay
// and error).
type FakeDeploy struct{ OnError OnError }

// AgentGetSteps asks the agent for its steps; the answer is
// AgentStepsListed. Refresh asks again in the middle of a planned flow (an
// out-of-band step rebooted the machine): the plan stays, the steps and
// their hardware managers' versions are recorded anew.
type AgentGetSteps struct {
	Kind        proto.StepKind
	HeartbeatAt time.Time
	Refresh     bool
}

// BuildImageArgs builds write_image's arguments (image_info, rendered
// config drive); the answer is ImageArgsBuilt.
type BuildImageArgs struct {
	Listed  AgentStepsListed
	OnError OnError
}

// AgentCommands reads the agent's command list; the answer is
// AgentCommandsRead.
type AgentCommands struct {
	Kind        proto.StepKind
	HeartbeatAt time.Time
}

// AgentExecute starts a step on the agent. HeartbeatAt, when set, is the
// heartbeat this answers (for the heartbeat-to-command latency).
type AgentExecute struct {
	Kind        proto.StepKind
	Step        proto.StepCall
	Versions    map[string]string
	HeartbeatAt time.Time
	OnError     OnError
}

// AgentPowerOff asks the agent to power the machine off (best effort,
// within Timeout).
type AgentPowerOff struct{ Timeout time.Duration }

// AgentPartitionUUIDs reads the deployed image's partitions from the agent
// and records them (best effort).
type AgentPartitionUUIDs struct{}

// AgentInstallBootloader has the agent install the deployed image's boot
// loader (image.install_bootloader) and waits for it to end. The partition
// UUIDs come from what AgentPartitionUUIDs recorded just before: the root
// (unless RootUUID names it) and, with SendESP, the EFI system partition.
// NeedRoot skips the call when no root UUID is known. SoftwareRAID is
// Ironic's flag for a node whose root is an md array; the agent finds the
// array's members itself.
type AgentInstallBootloader struct {
	RootUUID       string
	SendESP        bool
	NeedRoot       bool
	TargetBootMode string // "" lets the agent use the mode it booted in
	SoftwareRAID   bool
	OnError        OnError
}

// AgentFinalizeRescue hands the rescue password to the agent.
type AgentFinalizeRescue struct {
	Password string
	OnError  OnError
}

// DriverStep runs a step the conductor carries out through the node's
// interfaces (out of band) rather than through the agent.
type DriverStep struct {
	Step    proto.StepCall
	OnError OnError
}

// SetSecureBoot turns UEFI Secure Boot on or off through the node's
// management interface and records it in the node's secure_boot.
type SetSecureBoot struct {
	On      bool
	OnError OnError
}

// RefreshHardware re-reads the node's BIOS settings and firmware
// components into their cache (GET …/bios, …/firmware), best effort.
type RefreshHardware struct{}

// Wake asks for the node to be looked at again at At, when a wait it
// entered would expire; the periodic scan remains the safety net (a wake
// does not survive a restart).
type Wake struct{ At time.Time }

// ManagementCall makes the boot-device call an API client waits on (set,
// or read); the answer, failed or not, is ManagementAnswered.
type ManagementCall struct{ Request proto.ManagementRequest }

func (Update) isAction()                 {}
func (History) isAction()                {}
func (SetPower) isAction()               {}
func (SetBootDevice) isAction()          {}
func (PrepareRamdisk) isAction()         {}
func (CleanUpRamdisk) isAction()         {}
func (PrepareInstance) isAction()        {}
func (Validate) isAction()               {}
func (ReadPower) isAction()              {}
func (Inspect) isAction()                {}
func (ReadInventory) isAction()          {}
func (StoreInventory) isAction()         {}
func (EndAllocation) isAction()          {}
func (CreatePorts) isAction()            {}
func (FakeDeploy) isAction()             {}
func (AgentGetSteps) isAction()          {}
func (BuildImageArgs) isAction()         {}
func (AgentCommands) isAction()          {}
func (AgentExecute) isAction()           {}
func (AgentPowerOff) isAction()          {}
func (AgentPartitionUUIDs) isAction()    {}
func (AgentFinalizeRescue) isAction()    {}
func (AgentInstallBootloader) isAction() {}
func (DriverStep) isAction()             {}
func (ManagementCall) isAction()         {}
func (SetSecureBoot) isAction()          {}
func (RefreshHardware) isAction()        {}

// ErrorRule is how the executor treats a failure of a: Ignore, or end the
// list and report ActionFailed.
func ErrorRule(a Action) OnError {
	switch a := a.(type) {
	case SetPower:
		return a.OnError
	case SetBootDevice:
		return a.OnError
	case PrepareRamdisk:
		return a.OnError
	case CleanUpRamdisk:
		return a.OnError
	case PrepareInstance:
		return a.OnError
	case Validate:
		return a.OnError
	case ReadPower:
		return a.OnError
	case Inspect:
		return a.OnError
	case ReadInventory:
		return a.OnError
	case CreatePorts:
		return a.OnError
	case FakeDeploy:
		return a.OnError
	case BuildImageArgs:
		return a.OnError
	case AgentExecute:
		return a.OnError
	case AgentFinalizeRescue:
		return a.OnError
	case AgentInstallBootloader:
		return a.OnError
	case DriverStep:
		return a.OnError
	case SetSecureBoot:
		return a.OnError
	case AgentPowerOff, AgentPartitionUUIDs, RefreshHardware:
		return OnError{Ignore: true}
	}
	return OnError{}
}
func (Wake) isAction() {}
