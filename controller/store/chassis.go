package store

import "github.com/kilnhq/kiln/proto"

// ChassisResource is how chassis are stored (migration 0022); nodes refer
// to them by nodes.chassis_uuid.
var ChassisResource = Resource[proto.Chassis]{
	Kind:  "chassis",
	Table: "chassis",
	Meta: func(c *proto.Chassis) (*string, **proto.Time, **proto.Time) {
		return &c.UUID, &c.CreatedAt, &c.UpdatedAt
	},
	Columns: []Column[proto.Chassis]{
		{Name: "description", Value: func(c *proto.Chassis) any { return nullable(c.Description) }},
	},
	Sort:       map[string]string{"description": "COALESCE(description, '')"},
	Bare:       func(c *proto.Chassis) { c.Links, c.Nodes = nil, nil },
	ReferredBy: []string{"nodes.chassis_uuid"},
}
