package proto

// Allocation states: the conductor moves an allocation from allocating to
// active (a node was reserved for it) or error (none could be).
const (
	AllocationAllocating = "allocating"
	AllocationActive     = "active"
	AllocationError      = "error"
)

// Allocation asks for a node matching a resource class and traits, as
// Ironic's /v1/allocations shows it (microversion 1.52; owner 1.60).
type Allocation struct {
	UUID           string   `json:"uuid"`
	Name           *string  `json:"name"`
	NodeUUID       *string  `json:"node_uuid"`
	State          string   `json:"state"`
	LastError      *string  `json:"last_error"`
	ResourceClass  *string  `json:"resource_class"`
	Traits         []string `json:"traits"`
	CandidateNodes []string `json:"candidate_nodes"`
	Owner          *string  `json:"owner"`
	Extra          Dict     `json:"extra"`
	CreatedAt      *Time    `json:"created_at"`
	UpdatedAt      *Time    `json:"updated_at"`
	Links          []Link   `json:"links,omitempty"`
}

// AllocationFieldMinVersion is the microversion that introduced each
// allocation field newer than the collection (1.52).
var AllocationFieldMinVersion = map[string]int{"owner": 60}
