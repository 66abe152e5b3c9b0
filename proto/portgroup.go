package proto

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Portgroup is a link aggregate of a node's ports, as Ironic's
// /v1/portgroups shows it.
type Portgroup struct {
	UUID                     string    `json:"uuid"`
	Name                     *string   `json:"name"`
	Address                  *string   `json:"address"`
	NodeUUID                 string    `json:"node_uuid"`
	Extra                    Dict      `json:"extra"`
	InternalInfo             Dict      `json:"internal_info"`
	Mode                     *string   `json:"mode"`
	Properties               Dict      `json:"properties"`
	StandalonePortsSupported LooseBool `json:"standalone_ports_supported"`
	PhysicalNetwork          *string   `json:"physical_network"`
	Category                 *string   `json:"category"`
	// DynamicPortgroup marks a group Ironic would manage itself (1.111);
	// clients cannot set it, so it is false.
	DynamicPortgroup bool   `json:"dynamic_portgroup"`
	CreatedAt        *Time  `json:"created_at"`
	UpdatedAt        *Time  `json:"updated_at"`
	Links            []Link `json:"links,omitempty"`
	Ports            []Link `json:"ports,omitempty"`
}

// PortgroupFieldMinVersion gives the minor microversion that introduced each
// port group field; the others came with port groups (1.23).
var PortgroupFieldMinVersion = map[string]int{
	"mode":              26,
	"properties":        26,
	"physical_network":  102,
	"category":          103,
	"dynamic_portgroup": 111,
}

// TenantVIFKey is the internal_info key of a port or port group that records
// the VIF attached to it, as Ironic's network interfaces name it.
const TenantVIFKey = "tenant_vif_port_id"

// LooseBool is a boolean that also reads the strings Ironic's API accepts
// for one (oslo's bool_from_string, strict): true, yes, on, y, t, 1 and
// false, no, off, n, f, 0, any case. The OpenStack client sends
// standalone_ports_supported as "True".
type LooseBool bool

// UnmarshalJSON reads a JSON boolean or one of those strings.
func (b *LooseBool) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case bool:
		*b = LooseBool(v)
		return nil
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "t", "true", "on", "y", "yes":
			*b = true
			return nil
		case "0", "f", "false", "off", "n", "no":
			*b = false
			return nil
		}
		return fmt.Errorf("unrecognized value %q, acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", v)
	}
	return fmt.Errorf("%s is not of type 'boolean'", data)
}
