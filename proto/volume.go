package proto

// VolumeConnector is a node's initiator for remote volumes (Ironic's
// /v1/volume/connectors, 1.32): an iSCSI IQN, a WWPN, an IP or MAC.
type VolumeConnector struct {
	UUID        string `json:"uuid"`
	NodeUUID    string `json:"node_uuid"`
	Type        string `json:"type"`
	ConnectorID string `json:"connector_id"`
	Extra       Dict   `json:"extra"`
	CreatedAt   *Time  `json:"created_at"`
	UpdatedAt   *Time  `json:"updated_at"`
	Links       []Link `json:"links,omitempty"`
}

// VolumeTarget is a remote volume a node boots from or attaches (Ironic's
// /v1/volume/targets, 1.32); boot_index 0 is the boot volume.
type VolumeTarget struct {
	UUID       string `json:"uuid"`
	NodeUUID   string `json:"node_uuid"`
	VolumeType string `json:"volume_type"`
	VolumeID   string `json:"volume_id"`
	BootIndex  int    `json:"boot_index"`
	Properties Dict   `json:"properties"`
	Extra      Dict   `json:"extra"`
	CreatedAt  *Time  `json:"created_at"`
	UpdatedAt  *Time  `json:"updated_at"`
	Links      []Link `json:"links,omitempty"`
}

// Volume is GET /v1/volume (and a node's …/volume): links to the two
// collections.
type Volume struct {
	Links      []Link `json:"links"`
	Connectors []Link `json:"connectors"`
	Targets    []Link `json:"targets"`
}
