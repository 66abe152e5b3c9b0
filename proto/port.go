package proto

import "encoding/json"

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
	Description         *string `json:"description"`
	Vendor              *string `json:"vendor"`
	Category            *string `json:"category"`
	// AvailableForDynamicPortgroup is true unless the operator sets it
	// false (Ironic's default); see PortDefaults.
	AvailableForDynamicPortgroup bool   `json:"available_for_dynamic_portgroup"`
	CreatedAt                    *Time  `json:"created_at"`
	UpdatedAt                    *Time  `json:"updated_at"`
	Links                        []Link `json:"links,omitempty"`
}

// PortFieldMinVersion gives the minor microversion that introduced each port field.
var PortFieldMinVersion = map[string]int{
	"local_link_connection":           19,
	"pxe_enabled":                     19,
	"internal_info":                   18,
	"portgroup_uuid":                  24,
	"physical_network":                34,
	"is_smartnic":                     53,
	"name":                            88,
	"description":                     97,
	"vendor":                          100,
	"category":                        101,
	"available_for_dynamic_portgroup": 111,
}

// PortDefaults are the fields of a new port that are not zero values: a
// port boots from the network and may join a dynamic port group unless
// told otherwise, as in Ironic.
func PortDefaults() Port { return Port{PXEEnabled: true, AvailableForDynamicPortgroup: true} }

// PortDefaultListFields are the fields GET /v1/ports returns without detail.
var PortDefaultListFields = []string{"uuid", "address", "links"}

// UnmarshalJSON reads a port whose available_for_dynamic_portgroup is
// absent (a document stored before 1.111, an answer below it, a create
// that does not set it) as Ironic's default, true. Other fields absent
// from b keep their values, as encoding/json leaves them.
func (p *Port) UnmarshalJSON(b []byte) error {
	type plain Port
	v := plain(*p)
	v.AvailableForDynamicPortgroup = true
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = Port(v)
	return nil
}
