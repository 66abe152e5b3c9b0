package proto

import (
	"encoding/json"
	"time"
)

// Boot-device requests travel from the API to the node's conductor through
// driver_internal_info: the API records a ManagementRequest, the conductor
// carries it out under the node's reservation and records a
// ManagementResult with the same ID, which the waiting API request answers
// from.
const (
	InfoManagementRequest = "kiln_management_request"
	InfoManagementResult  = "kiln_management_result"
)

// Management operations.
const (
	OpSetBootDevice = "set_boot_device"
	OpGetBootDevice = "get_boot_device"
	// The other BMC actions of …/management and …/states (mgmtops.go).
	OpInjectNMI     = "inject_nmi"
	OpGetIndicators = "get_indicators"
	OpGetIndicator  = "get_indicator"
	OpSetIndicator  = "set_indicator"
	OpSetBootMode   = "set_boot_mode"
	OpSetSecureBoot = "set_secure_boot"
)

// AsyncManagementOp reports whether the API answers op at once (202) and
// the conductor's result lands on the node (boot_mode, secure_boot,
// last_error) rather than in an answer a client waits for.
func AsyncManagementOp(op string) bool { return op == OpSetBootMode || op == OpSetSecureBoot }

// ManagementRequest is one boot-device request waiting for the conductor.
type ManagementRequest struct {
	ID         string `json:"id"`
	Op         string `json:"op"`
	BootDevice string `json:"boot_device,omitempty"`
	Persistent bool   `json:"persistent,omitempty"`
	// Component, Indicator and State name an indicator and the state to
	// set (OpGetIndicator, OpSetIndicator).
	Component string `json:"component,omitempty"`
	Indicator string `json:"indicator,omitempty"`
	State     string `json:"state,omitempty"`
	// BootMode ("uefi" or "bios") and SecureBoot are OpSetBootMode's and
	// OpSetSecureBoot's targets.
	BootMode    string    `json:"boot_mode,omitempty"`
	SecureBoot  *bool     `json:"secure_boot,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	// VirtualMedia is what to attach (OpAttachVirtualMedia); DeviceTypes
	// what to detach (OpDetachVirtualMedia; none: every device).
	VirtualMedia *VirtualMediaAttach `json:"virtual_media,omitempty"`
	DeviceTypes  []string            `json:"device_types,omitempty"`
}

// ManagementResult is the conductor's answer to the request with ID.
type ManagementResult struct {
	ID         string  `json:"id"`
	BootDevice *string `json:"boot_device,omitempty"`
	Persistent *bool   `json:"persistent,omitempty"`
	// Error is what failed, in the driver's (the BMC's) words; Invalid says
	// the request itself was refused (a device the BMC does not allow).
	Error   string `json:"error,omitempty"`
	Invalid bool   `json:"invalid,omitempty"`
	// Indicators answers OpGetIndicators, IndicatorState OpGetIndicator.
	Indicators     []Indicator `json:"indicators,omitempty"`
	IndicatorState string      `json:"indicator_state,omitempty"`
	// VirtualMedia answers OpGetVirtualMedia.
	VirtualMedia []VirtualMedia `json:"virtual_media,omitempty"`
}

// Indicator is one indicator (an LED) of a hardware component, as
// GET …/management/indicators lists it.
type Indicator struct {
	Component string   `json:"component"`
	Name      string   `json:"name"`
	ReadOnly  bool     `json:"readonly"`
	States    []string `json:"states"`
}

// Indicator states, as Ironic names them (ironic.common.indicator_states).
const (
	IndicatorOff      = "off"
	IndicatorOn       = "on"
	IndicatorBlinking = "blinking"
	IndicatorUnknown  = "unknown"
)

// ToDict is the form stored in driver_internal_info.
func ToDict(v any) Dict {
	b, _ := json.Marshal(v)
	var d Dict
	_ = json.Unmarshal(b, &d)
	return d
}

// FromDict reads a value stored with ToDict into out; false when key is
// absent or does not decode.
func FromDict(d Dict, key string, out any) bool {
	v, ok := d[key]
	if !ok || v == nil {
		return false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return json.Unmarshal(b, out) == nil
}
