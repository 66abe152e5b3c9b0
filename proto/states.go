package proto

// ProvisionState is a node's provision state as Ironic spells it. The empty value
// stands for JSON null ("no state"), used for target_provision_state when stable.
type ProvisionState string

// Stable states.
const (
	StateEnroll     ProvisionState = "enroll"
	StateManageable ProvisionState = "manageable"
	StateAvailable  ProvisionState = "available"
	StateActive     ProvisionState = "active"
	StateError      ProvisionState = "error"
	StateRescue     ProvisionState = "rescue"
)

// Transient states.
const (
	StateVerifying   ProvisionState = "verifying"
	StateInspecting  ProvisionState = "inspecting"
	StateInspectWait ProvisionState = "inspect wait"
	StateCleaning    ProvisionState = "cleaning"
	StateCleanWait   ProvisionState = "clean wait"
	StateCleanHold   ProvisionState = "clean hold"
	StateDeploying   ProvisionState = "deploying"
	StateDeployWait  ProvisionState = "wait call-back"
	StateDeployHold  ProvisionState = "deploy hold"
	StateDeleting    ProvisionState = "deleting"
	StateAdopting    ProvisionState = "adopting"
	StateRescuing    ProvisionState = "rescuing"
	StateRescueWait  ProvisionState = "rescue wait"
	StateUnrescuing  ProvisionState = "unrescuing"
	StateServicing   ProvisionState = "servicing"
	StateServiceWait ProvisionState = "service wait"
	StateServiceHold ProvisionState = "service hold"
)

// Failed states.
const (
	StateInspectFailed  ProvisionState = "inspect failed"
	StateCleanFailed    ProvisionState = "clean failed"
	StateDeployFailed   ProvisionState = "deploy failed"
	StateAdoptFailed    ProvisionState = "adopt failed"
	StateRescueFailed   ProvisionState = "rescue failed"
	StateUnrescueFailed ProvisionState = "unrescue failed"
	StateServiceFailed  ProvisionState = "service failed"
)

// Target-only states: they appear in target_provision_state, never as a state.
const (
	StateDeleted        ProvisionState = "deleted"
	StateDeployComplete ProvisionState = "deploy complete"
)

// NoState is JSON null for provision_state fields.
const NoState ProvisionState = ""

// PowerState is a node's power state or power target.
type PowerState string

// Power states and power targets; NoPower is JSON null.
const (
	PowerOn         PowerState = "power on"
	PowerOff        PowerState = "power off"
	PowerRebooting  PowerState = "rebooting"
	PowerSoftReboot PowerState = "soft rebooting"
	PowerSoftOff    PowerState = "soft power off"
	NoPower         PowerState = ""
)

// Verb is the "target" of PUT /v1/nodes/{id}/states/provision.
type Verb string

// Provision verbs, as clients send them.
const (
	VerbManage   Verb = "manage"
	VerbProvide  Verb = "provide"
	VerbInspect  Verb = "inspect"
	VerbAdopt    Verb = "adopt"
	VerbAbort    Verb = "abort"
	VerbClean    Verb = "clean"
	VerbActive   Verb = "active"
	VerbDeploy   Verb = "deploy"
	VerbRebuild  Verb = "rebuild"
	VerbDeleted  Verb = "deleted"
	VerbUndeploy Verb = "undeploy"
	VerbRescue   Verb = "rescue"
	VerbUnrescue Verb = "unrescue"
	VerbUnhold   Verb = "unhold"
	VerbService  Verb = "service"
)
