package proto

// Agent-protocol wire types: what kiln-agent (or ironic-python-agent) and the
// controller (Kiln or Ironic) exchange. Field names and JSON types follow
// ironic-python-agent exactly so each half works with the other project's
// counterpart. Names carry an Agent/Step/Command prefix because the REST types
// of the controller live in the same package.

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MaskedToken is what the controller returns instead of the agent token on every
// lookup after the first: it means "keep the token you already have".
const MaskedToken = "******"

// Agent microversions: IPA sends min(server max, these) on each call.
const (
	AgentLookupMicroversion    = "1.62" // GET /v1/lookup
	AgentHeartbeatMicroversion = "1.68" // POST /v1/heartbeat/{uuid} (agent_verify_ca)
	AgentStatusMicroversion    = "1.72" // heartbeat agent_status / agent_status_message
)

// ---------------------------------------------------------------------------
// Lookup: GET /v1/lookup?addresses=mac1,mac2&node_uuid=U

// LookupResponse is the 200 body of GET /v1/lookup (and of POST
// /v1/continue_inspection at microversion ≥ 1.84).
type LookupResponse struct {
	Node   LookupNode   `json:"node"`
	Config LookupConfig `json:"config"`
}

// LookupNode is the restricted node view the agent gets. Secrets are masked.
type LookupNode struct {
	UUID               string         `json:"uuid"`
	Properties         map[string]any `json:"properties"`
	InstanceInfo       map[string]any `json:"instance_info"`
	DriverInternalInfo map[string]any `json:"driver_internal_info"`
	Links              []AgentLink    `json:"links,omitempty"`
}

// AgentLink is an Ironic resource link {"href","rel"}.
type AgentLink struct {
	Href string `json:"href"`
	Rel  string `json:"rel"`
	Type string `json:"type,omitempty"`
}

// LookupConfig is the "config" object of a lookup response: settings the
// controller pushes to the agent.
type LookupConfig struct {
	// HeartbeatTimeout (seconds): the agent heartbeats every
	// HeartbeatTimeout × U(0.3, 0.6).
	HeartbeatTimeout int `json:"heartbeat_timeout"`
	// AgentToken is the one-shot token, or MaskedToken on later lookups.
	AgentToken             string `json:"agent_token"`
	AgentTokenRequired     bool   `json:"agent_token_required"`
	AgentMD5ChecksumEnable bool   `json:"agent_md5_checksum_enable"`
	// DisableDeepImageInspection and PermittedImageFormats govern the image
	// format checks of the image writer.
	DisableDeepImageInspection bool     `json:"disable_deep_image_inspection"`
	PermittedImageFormats      []string `json:"permitted_image_formats,omitempty"`
	// Metrics, MetricsStatsd and AgentContainers are passed through untouched.
	Metrics         map[string]any `json:"metrics,omitempty"`
	MetricsStatsd   map[string]any `json:"metrics_statsd,omitempty"`
	AgentContainers map[string]any `json:"agent_containers,omitempty"`
	// ImmediateHeartbeat is Kiln's own key (Ironic never sends it): the
	// controller takes a heartbeat at any moment, so the agent heartbeats the
	// instant a step finishes. Without it the agent keeps IPA's timing, since
	// Ironic skips a heartbeat that arrives while its conductor still holds
	// the node's lock from starting the step.
	ImmediateHeartbeat bool `json:"kiln_immediate_heartbeat,omitempty"`
}

// ---------------------------------------------------------------------------
// Heartbeat: POST /v1/heartbeat/{uuid} → 202

// HeartbeatRequest is the body of POST /v1/heartbeat/{uuid}.
type HeartbeatRequest struct {
	// CallbackURL is http(s)://host:port of the agent API; IPv6 hosts in brackets.
	CallbackURL  string `json:"callback_url"`
	AgentVersion string `json:"agent_version"`
	AgentToken   string `json:"agent_token,omitempty"`
	// AgentVerifyCA is the PEM of the agent's self-signed certificate; when set
	// the controller talks to CallbackURL over https verifying with it.
	AgentVerifyCA      string `json:"agent_verify_ca,omitempty"`
	AgentStatus        string `json:"agent_status,omitempty"`
	AgentStatusMessage string `json:"agent_status_message,omitempty"`
}

// Heartbeat agent_status values (µv 1.72).
const (
	AgentStatusStart = "start"
	AgentStatusEnd   = "end"
	AgentStatusError = "error"
)

// ---------------------------------------------------------------------------
// Agent command API (port 9999)

// AgentRoot is the body of the agent's GET /.
type AgentRoot struct {
	Name           string            `json:"name"`
	Description    string            `json:"description"`
	Versions       []AgentAPIVersion `json:"versions"`
	DefaultVersion AgentAPIVersion   `json:"default_version"`
}

// AgentAPIVersion describes one version of the agent API.
type AgentAPIVersion struct {
	ID    string      `json:"id"`
	Links []AgentLink `json:"links"`
}

// AgentV1 is the body of the agent's GET /v1/.
type AgentV1 struct {
	ID         string           `json:"id"`
	Links      []AgentLink      `json:"links"`
	Commands   []AgentLink      `json:"commands"`
	Status     []AgentLink      `json:"status"`
	MediaTypes []AgentMediaType `json:"media_types"`
}

// AgentMediaType is one entry of AgentV1.MediaTypes.
type AgentMediaType struct {
	Base string `json:"base"`
	Type string `json:"type"`
}

// AgentStatus is the body of GET /v1/status (no token needed).
type AgentStatus struct {
	// StartedAt is seconds since the Unix epoch (a float, as IPA sends).
	StartedAt float64 `json:"started_at"`
	Version   string  `json:"version"`
}

// AgentFault is the error body of the agent API (IPA emulates WSME):
// faultcode is "Client" for 4xx and "Server" for 5xx.
type AgentFault struct {
	Faultcode   string `json:"faultcode"`
	Faultstring string `json:"faultstring"`
}

// CommandRequest is the body of POST /v1/commands/: name is "extension.command"
// and params must be a JSON object (IPA answers 400 otherwise).
type CommandRequest struct {
	Name   string          `json:"name"`
	Params json.RawMessage `json:"params"`
}

// NewCommandRequest marshals params (a struct or map; nil means {}) into a request.
func NewCommandRequest(name string, params any) (CommandRequest, error) {
	if params == nil {
		return CommandRequest{Name: name, Params: json.RawMessage(`{}`)}, nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return CommandRequest{}, fmt.Errorf("marshal params of %s: %w", name, err)
	}
	if len(b) == 0 || b[0] != '{' {
		return CommandRequest{}, fmt.Errorf("params of %s must be a JSON object, got %.20s", name, b)
	}
	return CommandRequest{Name: name, Params: b}, nil
}

// SplitCommandName splits "ext.cmd" into its extension and command.
func SplitCommandName(name string) (ext, cmd string, ok bool) {
	ext, cmd, ok = strings.Cut(name, ".")
	if !ok || ext == "" || cmd == "" || strings.Contains(cmd, ".") {
		return "", "", false
	}
	return ext, cmd, true
}

// CommandStatus is a command result's command_status.
type CommandStatus string

// Command statuses, as IPA spells them.
const (
	CommandRunning              CommandStatus = "RUNNING"
	CommandSucceeded            CommandStatus = "SUCCEEDED"
	CommandFailed               CommandStatus = "FAILED"
	CommandCleanVersionMismatch CommandStatus = "CLEAN_VERSION_MISMATCH"
)

// CommandResult is one command's state, returned by POST /v1/commands/,
// GET /v1/commands/{id} and listed by GET /v1/commands/.
type CommandResult struct {
	ID string `json:"id"`
	// CommandName is the command without its extension ("execute_clean_step").
	CommandName   string        `json:"command_name"`
	CommandStatus CommandStatus `json:"command_status"`
	// CommandError is null unless the command failed (or hit a version mismatch).
	CommandError *CommandError `json:"command_error"`
	// CommandResult is the command's result (null while an async command runs,
	// or {"progress": CommandProgress} when the command reports progress).
	CommandResult json.RawMessage `json:"command_result"`
}

// CommandError is IPA's serialized RESTError.
type CommandError struct {
	// Type is the error class ("CommandExecutionError", "InvalidCommandParamsError",
	// "VersionMismatch", "IncompatibleHardwareMethodError", ...).
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details string `json:"details"`
}

// Error makes a CommandError usable as a Go error.
func (e *CommandError) Error() string {
	if e.Details != "" {
		return e.Message + ": " + e.Details
	}
	return e.Message
}

// CommandList is the body of GET /v1/commands/ (oldest first).
type CommandList struct {
	Commands []CommandResult `json:"commands"`
}

// CommandProgressResult is the command_result of a RUNNING command that reports
// progress (Kiln extension; IPA leaves command_result null while running).
type CommandProgressResult struct {
	Progress CommandProgress `json:"progress"`
}

// CommandProgress is how far a long step (image write, erase) has come.
// BytesTotal is 0 when unknown.
type CommandProgress struct {
	BytesDone  int64  `json:"bytes_done"`
	BytesTotal int64  `json:"bytes_total"`
	Stage      string `json:"stage,omitempty"`
}

// ---------------------------------------------------------------------------
// Commands' parameters and results

// Command names the controller sends (extension.command).
const (
	CmdPrepareImage       = "standby.prepare_image"
	CmdRunImage           = "standby.run_image"
	CmdPowerOff           = "standby.power_off"
	CmdSync               = "standby.sync"
	CmdGetPartitionUUIDs  = "standby.get_partition_uuids"
	CmdGetCleanSteps      = "clean.get_clean_steps"
	CmdExecuteCleanStep   = "clean.execute_clean_step"
	CmdGetDeploySteps     = "deploy.get_deploy_steps"
	CmdExecuteDeployStep  = "deploy.execute_deploy_step"
	CmdGetServiceSteps    = "service.get_service_steps"
	CmdExecuteServiceStep = "service.execute_service_step"
	CmdInstallBootloader  = "image.install_bootloader"
	CmdCollectSystemLogs  = "log.collect_system_logs"
	CmdLockdown           = "system.lockdown"
	CmdGetHardwareInfo    = "poll.get_hardware_info"
	CmdFinalizeRescue     = "rescue.finalize_rescue"
)

// PrepareImageParams are the params of standby.prepare_image.
type PrepareImageParams struct {
	ImageInfo ImageInfo `json:"image_info"`
	// Configdrive is a string (gzip+base64 ISO or URL) or a dict; raw as sent.
	Configdrive json.RawMessage `json:"configdrive,omitempty"`
}

// PartitionUUIDs is the result of standby.get_partition_uuids (IPA's key names,
// spaces included).
type PartitionUUIDs struct {
	RootUUID          string `json:"root uuid,omitempty"`
	EFISystemPartUUID string `json:"efi system partition uuid,omitempty"`
	PRePBootPartUUID  string `json:"PReP Boot partition uuid,omitempty"`
}

// InstallBootloaderParams are the params of image.install_bootloader.
type InstallBootloaderParams struct {
	RootUUID                string `json:"root_uuid"`
	EFISystemPartUUID       string `json:"efi_system_part_uuid,omitempty"`
	PrepBootPartUUID        string `json:"prep_boot_part_uuid,omitempty"`
	TargetBootMode          string `json:"target_boot_mode,omitempty"`
	IgnoreBootloaderFailure bool   `json:"ignore_bootloader_failure,omitempty"`
}

// SystemLogsResult is the result of log.collect_system_logs.
type SystemLogsResult struct {
	// SystemLogs is a base64-encoded tar.gz.
	SystemLogs string `json:"system_logs"`
}

// FinalizeRescueParams are the params of rescue.finalize_rescue.
type FinalizeRescueParams struct {
	RescuePassword string `json:"rescue_password"`
	Hashed         bool   `json:"hashed"`
}

// ---------------------------------------------------------------------------
// Steps

// StepKind selects clean, deploy or service steps; it prefixes the JSON keys
// (clean_steps, deploy_result, service_version…).
type StepKind string

// Step kinds.
const (
	StepClean   StepKind = "clean"
	StepDeploy  StepKind = "deploy"
	StepService StepKind = "service"
)

// Step describes one step a hardware manager offers.
type Step struct {
	Step            string             `json:"step"`
	Priority        int                `json:"priority"`
	Interface       string             `json:"interface"`
	RebootRequested bool               `json:"reboot_requested"`
	Abortable       bool               `json:"abortable"`
	ArgsInfo        map[string]ArgInfo `json:"argsinfo,omitempty"`
}

// ArgInfo documents one argument a step accepts.
type ArgInfo struct {
	Description string `json:"description"`
	Required    bool   `json:"required"`
}

// StepCall is the "step" param of execute_X_step: the step plus its args. The
// agent echoes it back in the result (X_step).
type StepCall struct {
	Step
	Args map[string]any `json:"args,omitempty"`
	// Image, when set, is write_image's arguments, typed: they go on the
	// wire as args (and Args is not sent).
	Image *PrepareImageParams `json:"-"`
}

// MarshalJSON sends Image, when set, as the step's args.
func (c StepCall) MarshalJSON() ([]byte, error) {
	type plain StepCall
	if c.Image == nil {
		return json.Marshal(plain(c))
	}
	return json.Marshal(struct {
		Step
		Args *PrepareImageParams `json:"args"`
	}{c.Step, c.Image})
}

// ImageArgs are write_image's arguments: Image, or Args as received.
func (c StepCall) ImageArgs() (PrepareImageParams, error) {
	if c.Image != nil {
		return *c.Image, nil
	}
	var p PrepareImageParams
	b, err := json.Marshal(c.Args)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		return PrepareImageParams{}, fmt.Errorf("write_image args: %w", err)
	}
	return p, nil
}

// Name is the step's name (StepCall.Step.Step spelled out).
func (c StepCall) Name() string { return c.Step.Step }

// GetStepsParams are the params of get_X_steps.
type GetStepsParams struct {
	Node  map[string]any   `json:"node"`
	Ports []map[string]any `json:"ports"`
}

// ExecuteStepParams are the params of execute_X_step. Version is sent under
// "<kind>_version" (clean_version, deploy_version, service_version): use
// MarshalFor/UnmarshalFor.
type ExecuteStepParams struct {
	Step  StepCall         `json:"step"`
	Node  map[string]any   `json:"node"`
	Ports []map[string]any `json:"ports"`
	// Version is the hardware_manager_version map the controller cached with
	// the steps; nil when the controller sent none.
	Version map[string]string `json:"-"`
}

// MarshalFor encodes p for kind, naming the version map "<kind>_version".
func (p ExecuteStepParams) MarshalFor(kind StepKind) ([]byte, error) {
	m := map[string]any{"step": p.Step, "node": p.Node, "ports": p.Ports}
	if p.Version != nil {
		m[string(kind)+"_version"] = p.Version
	}
	return json.Marshal(m)
}

// UnmarshalFor decodes params of execute_X_step for kind.
func (p *ExecuteStepParams) UnmarshalFor(kind StepKind, b []byte) error {
	var raw struct {
		Step  *StepCall        `json:"step"`
		Node  map[string]any   `json:"node"`
		Ports []map[string]any `json:"ports"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("decode execute_%s_step params: %w", kind, err)
	}
	if raw.Step == nil || raw.Step.Step.Step == "" {
		return fmt.Errorf("execute_%s_step params: missing step", kind)
	}
	var ver map[string]json.RawMessage
	_ = json.Unmarshal(b, &ver)
	p.Step, p.Node, p.Ports, p.Version = *raw.Step, raw.Node, raw.Ports, nil
	if v, ok := ver[string(kind)+"_version"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &p.Version); err != nil {
			return fmt.Errorf("decode %s_version: %w", kind, err)
		}
	}
	return nil
}

// StepsResult is the result of get_X_steps:
// {"<kind>_steps": {"<manager>": [steps]}, "hardware_manager_version": {"<name>": "<ver>"}}.
type StepsResult struct {
	Kind StepKind
	// Steps groups steps by hardware manager name.
	Steps                  map[string][]Step
	HardwareManagerVersion map[string]string
}

// MarshalJSON names the steps key after Kind.
func (r StepsResult) MarshalJSON() ([]byte, error) {
	if r.Kind == "" {
		return nil, fmt.Errorf("StepsResult without Kind")
	}
	steps := r.Steps
	if steps == nil {
		steps = map[string][]Step{}
	}
	ver := r.HardwareManagerVersion
	if ver == nil {
		ver = map[string]string{}
	}
	return json.Marshal(map[string]any{
		string(r.Kind) + "_steps":  steps,
		"hardware_manager_version": ver,
	})
}

// UnmarshalJSON finds the "<kind>_steps" key and sets Kind from it.
func (r *StepsResult) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("decode steps result: %w", err)
	}
	*r = StepsResult{}
	for _, k := range []StepKind{StepClean, StepDeploy, StepService} {
		if v, ok := m[string(k)+"_steps"]; ok {
			r.Kind = k
			if err := json.Unmarshal(v, &r.Steps); err != nil {
				return fmt.Errorf("decode %s_steps: %w", k, err)
			}
			break
		}
	}
	if r.Kind == "" {
		return fmt.Errorf("steps result has no clean_steps, deploy_steps or service_steps")
	}
	if v, ok := m["hardware_manager_version"]; ok {
		if err := json.Unmarshal(v, &r.HardwareManagerVersion); err != nil {
			return fmt.Errorf("decode hardware_manager_version: %w", err)
		}
	}
	return nil
}

// ExecuteStepResult is the result of execute_X_step:
// {"<kind>_result": <the step's return value>, "<kind>_step": <echo of the step>}.
type ExecuteStepResult struct {
	Kind   StepKind
	Result any
	Step   StepCall
}

// MarshalJSON names the keys after Kind.
func (r ExecuteStepResult) MarshalJSON() ([]byte, error) {
	if r.Kind == "" {
		return nil, fmt.Errorf("ExecuteStepResult without Kind")
	}
	return json.Marshal(map[string]any{
		string(r.Kind) + "_result": r.Result,
		string(r.Kind) + "_step":   r.Step,
	})
}

// UnmarshalJSON finds the "<kind>_step" key and sets Kind from it.
func (r *ExecuteStepResult) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("decode execute step result: %w", err)
	}
	*r = ExecuteStepResult{}
	for _, k := range []StepKind{StepClean, StepDeploy, StepService} {
		if v, ok := m[string(k)+"_step"]; ok {
			r.Kind = k
			if err := json.Unmarshal(v, &r.Step); err != nil {
				return fmt.Errorf("decode %s_step: %w", k, err)
			}
			if res, ok := m[string(k)+"_result"]; ok {
				if err := json.Unmarshal(res, &r.Result); err != nil {
					return fmt.Errorf("decode %s_result: %w", k, err)
				}
			}
			return nil
		}
	}
	return fmt.Errorf("execute step result has no clean_step, deploy_step or service_step")
}

// ---------------------------------------------------------------------------
// Images

// ImageInfo is the image_info param of standby.prepare_image and of the
// write_image deploy step.
type ImageInfo struct {
	// ID is the image's id (the last path segment of image_source).
	ID   string   `json:"id"`
	URLs []string `json:"urls"`
	// DiskFormat: raw, qcow2, …; ContainerFormat: bare, …
	DiskFormat      string `json:"disk_format,omitempty"`
	ContainerFormat string `json:"container_format,omitempty"`
	// Checksum is a hex digest or the URL of a checksum file (legacy); prefer
	// OSHashAlgo + OSHashValue.
	Checksum        string `json:"checksum,omitempty"`
	OSHashAlgo      string `json:"os_hash_algo,omitempty"`
	OSHashValue     string `json:"os_hash_value,omitempty"`
	StreamRawImages bool   `json:"stream_raw_images"`
	NodeUUID        string `json:"node_uuid,omitempty"`
	// Proxies maps scheme → proxy URL; NoProxy is a comma list.
	Proxies map[string]string `json:"proxies,omitempty"`
	NoProxy string            `json:"no_proxy,omitempty"`
	// ImageType is "whole-disk" (default) or "partition".
	ImageType string `json:"image_type,omitempty"`
	// Partition-image fields.
	Kernel            string `json:"kernel,omitempty"`
	Ramdisk           string `json:"ramdisk,omitempty"`
	RootMB            int    `json:"root_mb,omitempty"`
	SwapMB            int    `json:"swap_mb,omitempty"`
	EphemeralMB       int    `json:"ephemeral_mb,omitempty"`
	EphemeralFormat   string `json:"ephemeral_format,omitempty"`
	PreserveEphemeral bool   `json:"preserve_ephemeral,omitempty"`
	DeployBootMode    string `json:"deploy_boot_mode,omitempty"`
	BootOption        string `json:"boot_option,omitempty"`
	DiskLabel         string `json:"disk_label,omitempty"`
	// RootDevice holds root device hints (instance_info.root_device over
	// properties.root_device) when the controller passes them along; the agent
	// otherwise reads them from the node.
	RootDevice map[string]any `json:"root_device,omitempty"`
	// ImageDownloadSource is http, local or swift.
	ImageDownloadSource string `json:"image_download_source,omitempty"`
}

// ---------------------------------------------------------------------------
// Inspection: POST /v1/continue_inspection[?node_uuid=] → 202

// InspectionRequest is the body the agent posts to the inspection callback.
// Everything but Inventory is plugin data.
type InspectionRequest struct {
	// Inventory is the hardware inventory (proto.Inventory when decoded).
	Inventory     json.RawMessage          `json:"inventory"`
	RootDisk      json.RawMessage          `json:"root_disk,omitempty"`
	BootInterface string                   `json:"boot_interface,omitempty"`
	Configuration *InspectionConfiguration `json:"configuration,omitempty"`
	// Error is null or what went wrong while collecting.
	Error *string `json:"error"`
	// LLDPRaw maps interface name → [[tlv type, "hex value"], …] (the lldp
	// collector).
	LLDPRaw map[string][][2]any `json:"lldp_raw,omitempty"`
	// Logs is the base64 tar.gz of the ramdisk's logs (the logs collector).
	Logs string `json:"logs,omitempty"`
	// PCIDevices is the pci-devices collector's list, which Ironic's
	// pci_devices hook matches against its aliases.
	PCIDevices []PCIDevice `json:"pci_devices,omitempty"`
	// DMI is the dmi-decode collector's {"bios": {…}, "cpu": [{…}],
	// "memory": {…, "devices": [{…}]}}, keyed by dmidecode's field names.
	DMI map[string]any `json:"dmi,omitempty"`
}

// PCIDevice is one entry of the pci-devices collector: hex IDs without
// "0x", as read from /sys/bus/pci/devices/<bus>/.
type PCIDevice struct {
	VendorID   string  `json:"vendor_id"`
	ProductID  string  `json:"product_id"`
	Class      string  `json:"class"`
	Revision   *string `json:"revision"`
	Bus        string  `json:"bus"`
	NumaNodeID *string `json:"numa_node_id"`
}

// InspectionConfiguration lists which collectors and managers produced the data.
type InspectionConfiguration struct {
	Collectors []string            `json:"collectors"`
	Managers   []InspectionManager `json:"managers"`
}

// InspectionManager is one hardware manager's name and version.
type InspectionManager struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// InspectionResponse is the 202 body: {"uuid"} below µv 1.84, the lookup
// format (node + config, with the token) from 1.84 on.
type InspectionResponse struct {
	UUID   string        `json:"uuid,omitempty"`
	Node   *LookupNode   `json:"node,omitempty"`
	Config *LookupConfig `json:"config,omitempty"`
}

// NodeUUID returns the node UUID from either response form.
func (r InspectionResponse) NodeUUID() string {
	if r.UUID != "" {
		return r.UUID
	}
	if r.Node != nil {
		return r.Node.UUID
	}
	return ""
}
