package proto

// Chassis groups nodes, as Ironic's /v1/chassis shows it.
type Chassis struct {
	UUID        string  `json:"uuid"`
	Description *string `json:"description"`
	Extra       Dict    `json:"extra"`
	CreatedAt   *Time   `json:"created_at"`
	UpdatedAt   *Time   `json:"updated_at"`
	Links       []Link  `json:"links,omitempty"`
	Nodes       []Link  `json:"nodes,omitempty"`
}
