package store

import (
	"errors"

	"github.com/kilnhq/kiln/proto"
)

// ErrDuplicateAllocationName: another allocation already has this name.
var ErrDuplicateAllocationName = errors.New("an allocation with this name already exists")

// AllocationResource is how allocations are stored (migration 0024). The
// node an allocation holds is named in both directions: node_uuid here,
// allocation_uuid in the node's document, written by the conductor's claim
// (see controller/allocation).
var AllocationResource = Resource[proto.Allocation]{
	Kind:  "allocation",
	Table: "allocations",
	Meta: func(a *proto.Allocation) (*string, **proto.Time, **proto.Time) {
		return &a.UUID, &a.CreatedAt, &a.UpdatedAt
	},
	Columns: []Column[proto.Allocation]{
		{Name: "name", Value: func(a *proto.Allocation) any { return nullable(a.Name) }},
		{Name: "node_uuid", Value: func(a *proto.Allocation) any { return nullable(a.NodeUUID) }},
		{Name: "resource_class", Value: func(a *proto.Allocation) any { return nullable(a.ResourceClass) }},
		{Name: "state", Value: func(a *proto.Allocation) any { return a.State }},
		{Name: "owner", Value: func(a *proto.Allocation) any { return nullable(a.Owner) }},
	},
	Sort: map[string]string{
		"name":           "COALESCE(name, '')",
		"state":          "state",
		"resource_class": "COALESCE(resource_class, '')",
		"owner":          "COALESCE(owner, '')",
	},
	Filters: map[string]string{
		"name": "name", "node_uuid": "node_uuid", "resource_class": "resource_class", "state": "state", "owner": "owner",
	},
	Unique: map[string]error{"allocations_name_key": ErrDuplicateAllocationName},
	Bare:   func(a *proto.Allocation) { a.Links = nil },
}
