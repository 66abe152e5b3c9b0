package store

import (
	"errors"

	"github.com/kilnhq/kiln/proto"
)

var (
	// ErrConnectorTaken: a connector of this type and connector_id exists.
	ErrConnectorTaken = errors.New("a volume connector with this type and connector ID already exists")
	// ErrBootIndexTaken: the node has a target with this boot index.
	ErrBootIndexTaken = errors.New("a volume target with this boot index already exists for the node")
)

// VolumeConnectorResource is how volume connectors are stored (migration
// 0025): each belongs to a node and is deleted with it.
var VolumeConnectorResource = Resource[proto.VolumeConnector]{
	Kind:  "volume connector",
	Table: "volume_connectors",
	Meta: func(v *proto.VolumeConnector) (*string, **proto.Time, **proto.Time) {
		return &v.UUID, &v.CreatedAt, &v.UpdatedAt
	},
	Columns: []Column[proto.VolumeConnector]{
		{Name: "node_uuid", Value: func(v *proto.VolumeConnector) any { return v.NodeUUID }},
		{Name: "type", Value: func(v *proto.VolumeConnector) any { return v.Type }},
		{Name: "connector_id", Value: func(v *proto.VolumeConnector) any { return v.ConnectorID }},
	},
	Sort:    map[string]string{"type": "type", "connector_id": "connector_id"},
	Filters: map[string]string{"node_uuid": "node_uuid"},
	Unique:  map[string]error{"volume_connectors_type_key": ErrConnectorTaken},
	Bare:    func(v *proto.VolumeConnector) { v.Links = nil },
}

// VolumeTargetResource is how volume targets are stored (migration 0025):
// each belongs to a node and is deleted with it; a node's boot indexes are
// unique.
var VolumeTargetResource = Resource[proto.VolumeTarget]{
	Kind:  "volume target",
	Table: "volume_targets",
	Meta: func(v *proto.VolumeTarget) (*string, **proto.Time, **proto.Time) {
		return &v.UUID, &v.CreatedAt, &v.UpdatedAt
	},
	Columns: []Column[proto.VolumeTarget]{
		{Name: "node_uuid", Value: func(v *proto.VolumeTarget) any { return v.NodeUUID }},
		{Name: "volume_type", Value: func(v *proto.VolumeTarget) any { return v.VolumeType }},
		{Name: "volume_id", Value: func(v *proto.VolumeTarget) any { return v.VolumeID }},
		{Name: "boot_index", Value: func(v *proto.VolumeTarget) any { return v.BootIndex }},
	},
	Sort:    map[string]string{"volume_type": "volume_type", "volume_id": "volume_id", "boot_index": "boot_index"},
	Filters: map[string]string{"node_uuid": "node_uuid"},
	Unique:  map[string]error{"volume_targets_node_uuid_key": ErrBootIndexTaken},
	Bare:    func(v *proto.VolumeTarget) { v.Links = nil },
}
