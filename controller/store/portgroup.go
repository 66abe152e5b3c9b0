package store

import (
	"errors"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

var (
	// ErrDuplicatePortgroupName: another port group already has this name.
	ErrDuplicatePortgroupName = errors.New("a port group with this name already exists")
	// ErrDuplicatePortgroupMAC: another port group already has this address.
	ErrDuplicatePortgroupMAC = errors.New("a port group with this MAC address already exists")
)

// PortgroupResource is how port groups are stored (migration 0023): they
// belong to a node by nodes.uuid (deleted with it) and ports belong to them
// by ports.portgroup_uuid.
var PortgroupResource = Resource[proto.Portgroup]{
	Kind:  "portgroup",
	Table: "portgroups",
	Meta: func(p *proto.Portgroup) (*string, **proto.Time, **proto.Time) {
		return &p.UUID, &p.CreatedAt, &p.UpdatedAt
	},
	Columns: []Column[proto.Portgroup]{
		{Name: "name", Value: func(p *proto.Portgroup) any { return nullable(p.Name) }},
		{Name: "address", Value: func(p *proto.Portgroup) any {
			if p.Address == nil {
				return nil
			}
			return strings.ToLower(*p.Address)
		}},
		{Name: "node_uuid", Value: func(p *proto.Portgroup) any { return p.NodeUUID }},
	},
	Sort:    map[string]string{"name": "COALESCE(name, '')", "address": "COALESCE(address, '')"},
	Filters: map[string]string{"node_uuid": "node_uuid", "address": "address"},
	// The node's conductor group and shard, copied by triggers (0030).
	InFilters: map[string]string{"conductor_group": "node_conductor_group", "shard": "node_shard"},
	Unique: map[string]error{
		"portgroups_name_key":    ErrDuplicatePortgroupName,
		"portgroups_address_key": ErrDuplicatePortgroupMAC,
	},
	Bare:       func(p *proto.Portgroup) { p.Links, p.Ports = nil, nil },
	ReferredBy: []string{"ports.portgroup_uuid"},
	NameColumn: "name",
}
