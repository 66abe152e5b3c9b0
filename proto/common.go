package proto

// Link is one entry of a resource's "links" list.
type Link struct {
	Href string `json:"href"`
	Rel  string `json:"rel"`
	Type string `json:"type,omitempty"`
}

// Dict is a free-form JSON object such as driver_info or properties.
type Dict = map[string]any

// Error is the inner document of Ironic's error body. On the wire it travels
// JSON-encoded as a string inside ErrorBody.ErrorMessage.
type Error struct {
	FaultString string  `json:"faultstring"`
	FaultCode   string  `json:"faultcode"` // "Client" or "Server"
	DebugInfo   *string `json:"debuginfo"`
}

// ErrorBody is the body of every Ironic error response.
type ErrorBody struct {
	ErrorMessage string `json:"error_message"`
}

// Version describes API version v1 in discovery documents.
type Version struct {
	ID         string `json:"id"`
	Links      []Link `json:"links"`
	Status     string `json:"status"`
	MinVersion string `json:"min_version"`
	Version    string `json:"version"`
}

// Root is the document served at GET /.
type Root struct {
	Name           string    `json:"name"`
	Description    string    `json:"description"`
	DefaultVersion Version   `json:"default_version"`
	Versions       []Version `json:"versions"`
}

// MediaTypes is part of the GET /v1/ document.
type MediaTypes struct {
	Base string `json:"base"`
	Type string `json:"type"`
}

// V1 is the document served at GET /v1/.
type V1 struct {
	ID              string     `json:"id"`
	Links           []Link     `json:"links"`
	MediaTypes      MediaTypes `json:"media_types"`
	Chassis         []Link     `json:"chassis"`
	Nodes           []Link     `json:"nodes"`
	Ports           []Link     `json:"ports"`
	Drivers         []Link     `json:"drivers"`
	Lookup          []Link     `json:"lookup,omitempty"`
	Heartbeat       []Link     `json:"heartbeat,omitempty"`
	Portgroups      []Link     `json:"portgroups,omitempty"`
	Volume          []Link     `json:"volume,omitempty"`
	Conductors      []Link     `json:"conductors,omitempty"`
	Allocations     []Link     `json:"allocations,omitempty"`
	Events          []Link     `json:"events,omitempty"`
	DeployTemplates []Link     `json:"deploy_templates,omitempty"`
	Shards          []Link     `json:"shards,omitempty"`
	Runbooks        []Link     `json:"runbooks,omitempty"`
	InspectionRules []Link     `json:"inspection_rules,omitempty"`
	Version         Version    `json:"version"`
}

// Driver is one entry of GET /v1/drivers.
type Driver struct {
	Name       string   `json:"name"`
	Hosts      []string `json:"hosts"`
	Type       string   `json:"type"`
	Links      []Link   `json:"links"`
	Properties []Link   `json:"properties,omitempty"`
}

// Microversion headers. Clients may send either request header; responses
// carry the three X-OpenStack-Ironic-API-* headers.
const (
	HeaderOpenStackAPIVersion = "OpenStack-API-Version"
	HeaderIronicAPIVersion    = "X-OpenStack-Ironic-API-Version"
	HeaderMinVersion          = "X-OpenStack-Ironic-API-Minimum-Version"
	HeaderMaxVersion          = "X-OpenStack-Ironic-API-Maximum-Version"
)
