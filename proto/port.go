package proto

// Port is a node's network port as /v1/ports shows it.
type Port struct {
	UUID                string  `json:"uuid"`
	Address             string  `json:"address"`
	NodeUUID            string  `json:"node_uuid"`
	Extra               Dict    `json:"extra"`
	InternalInfo        Dict    `json:"internal_info"`
	LocalLinkConnection Dict    `json:"local_link_connection"`
	PXEEnabled          bool    `json:"pxe_enabled"`
	PhysicalNetwork     *string `json:"physical_network"`
	PortgroupUUID       *string `json:"portgroup_uuid"`
	IsSmartNIC          bool    `json:"is_smartnic"`
	Name                *string `json:"name"`
	CreatedAt           *Time   `json:"created_at"`
	UpdatedAt           *Time   `json:"updated_at"`
	Links               []Link  `json:"links,omitempty"`
}

// PortFieldMinVersion gives the minor microversion that introduced each port field.
var PortFieldMinVersion = map[string]int{
	"local_link_connection": 19,
	"pxe_enabled":           19,
	"internal_info":         18,
	"portgroup_uuid":        24,
	"physical_network":      34,
	"is_smartnic":           53,
	"name":                  88,
}

// PortDefaultListFields are the fields GET /v1/ports returns without detail.
var PortDefaultListFields = []string{"uuid", "address", "links"}
