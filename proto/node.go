package proto

// Node is a bare-metal node as the /v1/nodes API shows it, with every field Ironic
// has up to Kiln's maximum microversion. Nullable fields are pointers (nil is JSON
// null); free-form objects are Dicts. The API hides fields newer than the
// request's microversion using NodeFieldMinVersion.
type Node struct {
	UUID               string  `json:"uuid"`
	Name               *string `json:"name"`
	Driver             string  `json:"driver"`
	DriverInfo         Dict    `json:"driver_info"`
	DriverInternalInfo Dict    `json:"driver_internal_info"`
	InstanceInfo       Dict    `json:"instance_info"`
	InstanceUUID       *string `json:"instance_uuid"`
	// InstanceName is the deployed instance's human-readable name (1.104),
	// taken from instance_info.display_name when unset, as Nova sets that.
	InstanceName *string `json:"instance_name"`
	Properties   Dict    `json:"properties"`
	Extra        Dict    `json:"extra"`
	ChassisUUID  *string `json:"chassis_uuid"`

	ProvisionState       ProvisionState  `json:"provision_state"`
	TargetProvisionState *ProvisionState `json:"target_provision_state"`
	ProvisionUpdatedAt   *Time           `json:"provision_updated_at"`
	PowerState           *PowerState     `json:"power_state"`
	TargetPowerState     *PowerState     `json:"target_power_state"`
	Maintenance          bool            `json:"maintenance"`
	MaintenanceReason    *string         `json:"maintenance_reason"`
	Fault                *string         `json:"fault"`
	// Health is the hardware health the BMC reports (OK, Warning,
	// Critical; 1.109); null where the driver reports none.
	Health         *string `json:"health"`
	LastError      *string `json:"last_error"`
	Reservation    *string `json:"reservation"`
	ConsoleEnabled bool    `json:"console_enabled"`

	InspectionStartedAt  *Time `json:"inspection_started_at"`
	InspectionFinishedAt *Time `json:"inspection_finished_at"`
	CleanStep            Dict  `json:"clean_step"`
	DeployStep           Dict  `json:"deploy_step"`
	ServiceStep          Dict  `json:"service_step"`
	RAIDConfig           Dict  `json:"raid_config"`
	TargetRAIDConfig     Dict  `json:"target_raid_config"`

	BIOSInterface       string `json:"bios_interface"`
	BootInterface       string `json:"boot_interface"`
	ConsoleInterface    string `json:"console_interface"`
	DeployInterface     string `json:"deploy_interface"`
	FirmwareInterface   string `json:"firmware_interface"`
	InspectInterface    string `json:"inspect_interface"`
	ManagementInterface string `json:"management_interface"`
	NetworkInterface    string `json:"network_interface"`
	PowerInterface      string `json:"power_interface"`
	RAIDInterface       string `json:"raid_interface"`
	RescueInterface     string `json:"rescue_interface"`
	StorageInterface    string `json:"storage_interface"`
	VendorInterface     string `json:"vendor_interface"`

	ResourceClass   *string  `json:"resource_class"`
	Traits          []string `json:"traits"`
	ConductorGroup  string   `json:"conductor_group"`
	AutomatedClean  *bool    `json:"automated_clean"`
	Protected       bool     `json:"protected"`
	ProtectedReason *string  `json:"protected_reason"`
	Conductor       *string  `json:"conductor"`
	Owner           *string  `json:"owner"`
	Description     *string  `json:"description"`
	AllocationUUID  *string  `json:"allocation_uuid"`
	Retired         bool     `json:"retired"`
	RetiredReason   *string  `json:"retired_reason"`
	Lessee          *string  `json:"lessee"`
	NetworkData     Dict     `json:"network_data"`
	BootMode        *string  `json:"boot_mode"`
	SecureBoot      *bool    `json:"secure_boot"`
	Shard           *string  `json:"shard"`
	ParentNode      *string  `json:"parent_node"`
	DisablePowerOff bool     `json:"disable_power_off"`

	CreatedAt *Time `json:"created_at"`
	UpdatedAt *Time `json:"updated_at"`

	// Links and the sub-resource links are filled in by the API on output.
	Links      []Link `json:"links,omitempty"`
	Ports      []Link `json:"ports,omitempty"`
	States     []Link `json:"states,omitempty"`
	Portgroups []Link `json:"portgroups,omitempty"`
	Volume     []Link `json:"volume,omitempty"`
}

// NodeFieldMinVersion gives, for each node field, the minor microversion (1.N)
// that introduced it. Fields absent from the map exist since 1.1.
var NodeFieldMinVersion = map[string]int{
	"driver_internal_info":   3,
	"name":                   5,
	"inspection_started_at":  6,
	"inspection_finished_at": 6,
	"clean_step":             7,
	"raid_config":            12,
	"target_raid_config":     12,
	"network_interface":      20,
	"resource_class":         21,
	"boot_interface":         31,
	"console_interface":      31,
	"deploy_interface":       31,
	"inspect_interface":      31,
	"management_interface":   31,
	"power_interface":        31,
	"raid_interface":         31,
	"vendor_interface":       31,
	"storage_interface":      33,
	"volume":                 32,
	"traits":                 37,
	"rescue_interface":       38,
	"bios_interface":         40,
	"fault":                  42,
	"deploy_step":            44,
	"conductor_group":        46,
	"automated_clean":        47,
	"protected":              48,
	"protected_reason":       48,
	"conductor":              49,
	"owner":                  50,
	"description":            51,
	"allocation_uuid":        52,
	"retired":                61,
	"retired_reason":         61,
	"lessee":                 65,
	"network_data":           66,
	"boot_mode":              75,
	"secure_boot":            75,
	"shard":                  82,
	"parent_node":            83,
	"firmware_interface":     86,
	"service_step":           87,
	"disable_power_off":      95,
	"instance_name":          104,
	"health":                 109,
	"portgroups":             24,
	"states":                 14,
}

// NodeDefaultListFields are the fields GET /v1/nodes returns without detail.
var NodeDefaultListFields = []string{"uuid", "name", "instance_uuid", "power_state", "provision_state", "maintenance", "links"}

// NodeStates is the body of GET /v1/nodes/{id}/states.
type NodeStates struct {
	ConsoleEnabled       bool            `json:"console_enabled"`
	LastError            *string         `json:"last_error"`
	PowerState           *PowerState     `json:"power_state"`
	ProvisionState       ProvisionState  `json:"provision_state"`
	TargetPowerState     *PowerState     `json:"target_power_state"`
	TargetProvisionState *ProvisionState `json:"target_provision_state"`
	ProvisionUpdatedAt   *Time           `json:"provision_updated_at"`
	RAIDConfig           Dict            `json:"raid_config"`
	TargetRAIDConfig     Dict            `json:"target_raid_config"`
	BootMode             *string         `json:"boot_mode"`
	SecureBoot           *bool           `json:"secure_boot"`
}

// ProvisionRequest is the body of PUT /v1/nodes/{id}/states/provision.
type ProvisionRequest struct {
	Target         Verb   `json:"target"`
	ConfigDrive    any    `json:"configdrive,omitempty"` // string (gzip+base64 ISO or URL) or dict
	CleanSteps     []Dict `json:"clean_steps,omitempty"`
	DeploySteps    []Dict `json:"deploy_steps,omitempty"`
	ServiceSteps   []Dict `json:"service_steps,omitempty"`
	RescuePassword string `json:"rescue_password,omitempty"`
	DisableRamdisk *bool  `json:"disable_ramdisk,omitempty"`
	Runbook        string `json:"runbook,omitempty"`
}

// PowerRequest is the body of PUT /v1/nodes/{id}/states/power.
type PowerRequest struct {
	Target  PowerState `json:"target"`
	Timeout *int       `json:"timeout,omitempty"`
}

// BootDeviceRequest is the body of PUT /v1/nodes/{id}/management/boot_device.
type BootDeviceRequest struct {
	BootDevice string `json:"boot_device"`
	Persistent bool   `json:"persistent"`
}

// BootDevice is the body of GET /v1/nodes/{id}/management/boot_device.
type BootDevice struct {
	BootDevice *string `json:"boot_device"`
	Persistent *bool   `json:"persistent"`
}

// MaintenanceRequest is the body of PUT /v1/nodes/{id}/maintenance.
type MaintenanceRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ValidateResult is one interface's entry in GET /v1/nodes/{id}/validate.
type ValidateResult struct {
	Result *bool   `json:"result"`
	Reason *string `json:"reason,omitempty"`
}

// HistoryEvent is one entry of GET /v1/nodes/{id}/history.
type HistoryEvent struct {
	UUID      string `json:"uuid"`
	CreatedAt *Time  `json:"created_at"`
	Severity  string `json:"severity"` // INFO, WARNING, ERROR
	Event     string `json:"event"`
	EventType string `json:"event_type,omitempty"`
	Conductor string `json:"conductor,omitempty"`
	User      string `json:"user,omitempty"`
	// Project (1.113), State, TargetProvisionState and DurationSeconds
	// (1.115; the seconds since the node's provision_updated_at) are
	// shown in detail only; the store records the node's state with the
	// event.
	Project              *string `json:"project,omitempty"`
	State                string  `json:"state,omitempty"`
	TargetProvisionState *string `json:"target_provision_state,omitempty"`
	DurationSeconds      *int64  `json:"duration_seconds,omitempty"`
	Links                []Link  `json:"links,omitempty"`
}
