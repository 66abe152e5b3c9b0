// Package flowstate is the typed form of the work a node's flow keeps in
// driver_internal_info: the running agent, the step plan, the requests the
// API hands to the conductor. Its codec is the only code that knows the
// dictionary's keys, so the conductor and the API read and write fields, not
// strings, while Ironic clients still see the keys they expect.
package flowstate

import (
	"time"

	"github.com/kilnhq/kiln/proto"
)

// Version is the version of the state this code writes. Records without a
// version (written before the state was typed) are version 0 and migrate on
// read.
const Version = 1

// State is one node's flow state. The zero value is "nothing running".
type State struct {
	// Version is the version the record was read at; Encode writes Version.
	Version int

	// Agent is the ramdisk agent of the node's last heartbeat.
	Agent Agent

	// CachedSteps are the steps the agent last listed, by kind and hardware
	// manager, and CachedStepsVersions the managers' versions then.
	CachedCleanSteps    map[string][]proto.Step
	CachedDeploySteps   map[string][]proto.Step
	CachedServiceSteps  map[string][]proto.Step
	CachedStepsVersions map[string]string

	// Request is the provision request the API recorded and the conductor
	// has not taken up yet; nil when there is none.
	Request *Request
	// BootDevice is the last requested boot device; BootDevicePending says
	// the conductor has yet to apply it.
	BootDevice        *BootDevice
	BootDevicePending bool
	// PowerTimeout is the timeout of a pending soft power request, in
	// seconds; 0 when none was given.
	PowerTimeout int
	// HeartbeatPending is when an agent heartbeat arrived that the conductor
	// has not acted on yet; zero when there is none.
	HeartbeatPending time.Time
	// InspectionPending says the agent delivered an inventory.
	InspectionPending bool

	// Steps is the plan of the running clean, deploy or service flow (nil:
	// not planned yet; empty: nothing to run), StepIndex the current step,
	// StepSent whether it went to the agent and StepSentAt when.
	Steps      []proto.StepCall
	StepIndex  int
	StepSent   bool
	StepSentAt time.Time
	// ManualCleanSteps, UserDeploySteps and ServiceSteps are the steps the
	// operator asked for, kept from the request until the agent's own steps
	// are known and the plan is made.
	ManualCleanSteps []proto.StepCall
	UserDeploySteps  []proto.StepCall
	ServiceSteps     []proto.StepCall
	// ImageArgs are write_image's arguments (image_info and config drive),
	// built once when the deploy is planned and sent with that step.
	ImageArgs *proto.PrepareImageParams
	// Progress is how far the running step has come.
	Progress *Progress

	// PartitionUUIDs are the deployed image's partitions.
	PartitionUUIDs *proto.PartitionUUIDs

	// LastBMCCheck is the outcome of the conductor's last BMC exchange.
	LastBMCCheck *proto.BMCCheck
	// ManagementRequest is a boot-device request waiting for the conductor;
	// ManagementResult the conductor's answer to the last one.
	ManagementRequest *proto.ManagementRequest
	ManagementResult  *proto.ManagementResult

	// extra holds the keys this code does not know (and values that did not
	// decode), written back unchanged.
	extra map[string]any
}

// Agent is the agent the node's last heartbeat described, and its token.
type Agent struct {
	URL           string
	Version       string
	VerifyCA      string
	LastHeartbeat time.Time
	// Token is the agent's secret token; TokenPregenerated says it was put
	// on the boot medium before the agent booted (and so outlives power
	// changes).
	Token             string
	TokenPregenerated bool
	// TokenIssued is when a lookup gave the agent its token. The agent
	// heartbeats at once after a lookup, so from then on its heartbeat
	// timeout runs: a lookup whose answer was lost (the controller that
	// served it died) leaves an agent that can never heartbeat.
	TokenIssued time.Time
}

// Request is a provision request on its way from the API to the conductor.
type Request struct {
	Verb           string               `json:"verb"`
	From           proto.ProvisionState `json:"from"`
	RequestedAt    string               `json:"requested_at,omitempty"`
	CleanSteps     []proto.StepCall     `json:"clean_steps,omitzero"`
	DeploySteps    []proto.StepCall     `json:"deploy_steps,omitzero"`
	ServiceSteps   []proto.StepCall     `json:"service_steps,omitzero"`
	DisableRamdisk *bool                `json:"disable_ramdisk,omitempty"`
}

// BootDevice is a requested boot device.
type BootDevice struct {
	Device     string `json:"boot_device"`
	Persistent bool   `json:"persistent"`
}

// Progress is how far the running step has come (a Kiln extension; Ironic
// has no such field, its clients ignore it).
type Progress struct {
	// Step is the step this progress belongs to, "interface.step".
	Step       string      `json:"step"`
	BytesDone  int64       `json:"bytes_done"`
	BytesTotal int64       `json:"bytes_total"`
	Stage      string      `json:"stage,omitempty"`
	UpdatedAt  *proto.Time `json:"updated_at"`
}

// ClearFlow forgets the running flow's bookkeeping (request, plan, pending
// heartbeat and inventory, progress); the agent and operator steps stay.
func (s *State) ClearFlow() {
	s.Request = nil
	s.ResetPlan()
	s.HeartbeatPending = time.Time{}
	s.InspectionPending = false
	s.Progress = nil
}

// ResetPlan drops the step plan so that the next heartbeat makes a new one.
func (s *State) ResetPlan() {
	s.Steps, s.StepIndex, s.StepSent, s.StepSentAt = nil, 0, false, time.Time{}
	s.ImageArgs = nil
}

// ForgetOperatorSteps drops the steps the operator asked for.
func (s *State) ForgetOperatorSteps() {
	s.ManualCleanSteps, s.UserDeploySteps, s.ServiceSteps = nil, nil, nil
}

// WipeAgent forgets the running agent, as Ironic does on power changes: the
// next agent must look up and get a fresh token. A pre-generated token
// stays: it is on the boot medium the next agent boots from.
func (s *State) WipeAgent() {
	token, pregen, version := s.Agent.Token, s.Agent.TokenPregenerated, s.Agent.Version
	s.Agent = Agent{Version: version}
	if pregen {
		s.Agent.Token, s.Agent.TokenPregenerated = token, true
	}
	s.CachedCleanSteps, s.CachedDeploySteps, s.CachedStepsVersions = nil, nil, nil
}

// ForgetAgent ends an agent's life at the end of a flow: unlike WipeAgent
// it also drops a pre-generated token.
func (s *State) ForgetAgent() {
	s.WipeAgent()
	s.Agent.Token, s.Agent.TokenPregenerated = "", false
}

// CachedSteps returns the cached steps of kind.
func (s *State) CachedSteps(kind proto.StepKind) map[string][]proto.Step {
	switch kind {
	case proto.StepClean:
		return s.CachedCleanSteps
	case proto.StepDeploy:
		return s.CachedDeploySteps
	case proto.StepService:
		return s.CachedServiceSteps
	}
	return nil
}

// SetCachedSteps records the steps the agent listed for kind.
func (s *State) SetCachedSteps(kind proto.StepKind, steps map[string][]proto.Step) {
	switch kind {
	case proto.StepClean:
		s.CachedCleanSteps = steps
	case proto.StepDeploy:
		s.CachedDeploySteps = steps
	case proto.StepService:
		s.CachedServiceSteps = steps
	}
}
