package proto

// BIOSSetting is one BIOS attribute of a node as its BMC last reported it
// (GET /v1/nodes/{id}/bios), with what the BMC's attribute registry says
// about it. Ironic stores values as text: a number is "60", a boolean
// "True" or "False". Registry fields are nil when the BMC has no registry
// entry for the attribute.
type BIOSSetting struct {
	Name            string   `json:"name"`
	Value           *string  `json:"value"`
	AttributeType   *string  `json:"attribute_type"`
	AllowableValues []string `json:"allowable_values"`
	LowerBound      *int64   `json:"lower_bound"`
	UpperBound      *int64   `json:"upper_bound"`
	MinLength       *int64   `json:"min_length"`
	MaxLength       *int64   `json:"max_length"`
	ReadOnly        *bool    `json:"read_only"`
	ResetRequired   *bool    `json:"reset_required"`
	Unique          *bool    `json:"unique"`
	CreatedAt       *Time    `json:"created_at"`
	UpdatedAt       *Time    `json:"updated_at"`
	Links           []Link   `json:"links,omitempty"`
}

// BIOSRegistryFields are the registry fields of a BIOS setting, shown from
// microversion 1.74 (with ?detail=true in lists, always in GET of one).
var BIOSRegistryFields = []string{
	"attribute_type", "allowable_values", "lower_bound", "max_length", "min_length",
	"read_only", "reset_required", "unique", "upper_bound",
}

// FirmwareComponent is one firmware component of a node (GET
// /v1/nodes/{id}/firmware, microversion 1.86): what it runs now, what it
// ran first, and the last version an update asked for; from 1.114 also
// who made the hardware it runs on, as the BMC reports it (null where it
// reports nothing).
type FirmwareComponent struct {
	Component          string  `json:"component"`
	InitialVersion     string  `json:"initial_version"`
	CurrentVersion     *string `json:"current_version"`
	LastVersionFlashed *string `json:"last_version_flashed"`
	Vendor             *string `json:"vendor"`
	Model              *string `json:"model"`
	SerialNumber       *string `json:"serial_number"`
	CreatedAt          *Time   `json:"created_at"`
	UpdatedAt          *Time   `json:"updated_at"`
}
