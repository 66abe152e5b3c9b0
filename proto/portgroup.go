package proto

// Portgroup is a link aggregate of a node's ports, as Ironic's
// /v1/portgroups shows it.
type Portgroup struct {
	UUID                     string  `json:"uuid"`
	Name                     *string `json:"name"`
	Address                  *string `json:"address"`
	NodeUUID                 string  `json:"node_uuid"`
	Extra                    Dict    `json:"extra"`
	InternalInfo             Dict    `json:"internal_info"`
	Mode                     *string `json:"mode"`
	Properties               Dict    `json:"properties"`
	StandalonePortsSupported bool    `json:"standalone_ports_supported"`
	PhysicalNetwork          *string `json:"physical_network"`
	Category                 *string `json:"category"`
	CreatedAt                *Time   `json:"created_at"`
	UpdatedAt                *Time   `json:"updated_at"`
	Links                    []Link  `json:"links,omitempty"`
	Ports                    []Link  `json:"ports,omitempty"`
}

// PortgroupFieldMinVersion gives the minor microversion that introduced each
// port group field; the others came with port groups (1.23).
var PortgroupFieldMinVersion = map[string]int{
	"mode":             26,
	"properties":       26,
	"physical_network": 102,
	"category":         103,
}

// TenantVIFKey is the internal_info key of a port or port group that records
// the VIF attached to it, as Ironic's network interfaces name it.
const TenantVIFKey = "tenant_vif_port_id"
