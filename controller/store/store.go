// Package store persists Kiln's controller state — nodes, ports, node history,
// inspection inventories and the registry of live conductors — behind one
// interface, so the rest of the controller never knows whether it talks to the
// embedded SQLite file (one controller) or to a PostgreSQL server shared by
// several controllers.
//
// Every mutation of a node happens under its reservation (Reserve/Release), a
// lock held by one conductor. A lock held by a conductor that stopped
// heartbeating (no heartbeat within Options.DeadAfter) can be taken over, so a
// crashed controller never leaves nodes locked forever.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// Errors returned by the Store, wrapped with what was being done; test them
// with errors.Is.
var (
	ErrNotFound      = errors.New("not found")
	ErrDuplicateName = errors.New("a node with this name already exists")
	ErrDuplicateUUID = errors.New("an object with this UUID already exists")
	ErrDuplicateMAC  = errors.New("a port with this MAC address already exists")
	// ErrDuplicatePortName: another port already has this name.
	ErrDuplicatePortName = errors.New("a port with this name already exists")
	// ErrLocked: the node is reserved by a live conductor (or by the caller
	// itself: reservations are not re-entrant). errors.As to *LockedError
	// tells who holds it.
	ErrLocked = errors.New("node is locked")
	// ErrNotReserved: Release by a conductor that does not hold the node.
	ErrNotReserved = errors.New("node is not reserved by this conductor")
	// ErrBadSortKey: NodeQuery/PortQuery.SortKey names no sortable field.
	ErrBadSortKey = errors.New("invalid sort key")
	// ErrBadQuery: an invalid SortDir or a negative Limit.
	ErrBadQuery = errors.New("invalid query")
)

// LockedError says which conductor holds a node's reservation. It matches
// ErrLocked with errors.Is.
type LockedError struct {
	Node   string // the node as the caller named it
	Holder string // hostname of the conductor holding the reservation
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("node %s is locked by conductor %s", e.Node, e.Holder)
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Store is Kiln's persistence. Implementations are safe for concurrent use.
// Nodes and ports are returned without Links (the API fills them in) and
// callers own the returned values.
type Store interface {
	// CreateNode stores a new node and sets its CreatedAt. n.UUID must be set
	// by the caller. ErrDuplicateUUID / ErrDuplicateName when taken.
	CreateNode(ctx context.Context, n *proto.Node) error
	// GetNode accepts a UUID or a name.
	GetNode(ctx context.Context, ident string) (*proto.Node, error)
	ListNodes(ctx context.Context, q NodeQuery) ([]*proto.Node, error)
	// UpdateNode runs fn on the current node and stores the result with
	// UpdatedAt set, atomically: it is stored only if no other write
	// changed the node since fn's copy was read. Unless fn returns an
	// error: then nothing changes and that error is returned as is. fn may
	// run several times (each time on a freshly read node, when a write
	// came in between or the database asks for a retry) and only its last
	// run's result is stored, so fn must leave nothing behind but what it
	// assigns: no appends to outer slices, counters, sends, or effects
	// outside the node (a value it generates, such as a token, must be
	// assigned to an outer variable, not accumulated). fn must not write
	// to the Store and must not change the UUID. Whatever fn leaves in
	// Reservation is stored, so leave it alone and use Reserve and Release.
	UpdateNode(ctx context.Context, ident string, fn func(n *proto.Node) error) (*proto.Node, error)
	// DeleteNode deletes the node and its ports, history and inventory.
	DeleteNode(ctx context.Context, uuid string) error

	// AgentOf reads, by UUID or name, what an agent heartbeat is judged on,
	// with one indexed read and without decoding the node: the hot path of
	// POST /v1/heartbeat.
	AgentOf(ctx context.Context, ident string) (AgentView, error)
	// RecordAgent sets string keys of driver_internal_info (and
	// provision_updated_at when touchProvision) and UpdatedAt, in one
	// conditional UPDATE that applies only while the node is as seen; false
	// when it changed since, and then nothing was written.
	RecordAgent(ctx context.Context, seen AgentView, set []KeyValue, touchProvision bool) (bool, error)
	// RecordSeen records, in a narrow row and not the node's documents,
	// that the agent seen heartbeat at a time (agentseen.go): the stamp
	// every read of driver_internal_info.agent_last_heartbeat merges in;
	// false when the node changed since it was seen.
	RecordSeen(ctx context.Context, seen AgentView, at time.Time) (bool, error)
	// NodesWithWork lists, by index and without reading documents, the
	// free nodes a conductor's scan should look at (see WorkQuery).
	NodesWithWork(ctx context.Context, q WorkQuery) ([]string, error)
	// PowerSyncNodes lists the nodes of a conductor group whose power
	// state a sync round may read back, without decoding them.
	PowerSyncNodes(ctx context.Context, conductorGroup string) ([]PowerSyncNode, error)

	// Reserve takes the node's reservation for conductor, atomically, when it
	// is free or held by a conductor that is not alive (not registered, or no
	// heartbeat within DeadAfter, or unregistered). It returns the node with
	// Reservation set. A reservation held by a live conductor — including
	// conductor itself — gives a *LockedError (errors.Is ErrLocked).
	Reserve(ctx context.Context, ident, conductor string) (*proto.Node, error)
	// Release clears the reservation if conductor holds it: *LockedError if
	// another conductor holds it, ErrNotReserved if nobody does.
	Release(ctx context.Context, uuid, conductor string) error
	// ReleaseDead clears the reservations held by conductors that are not
	// alive and returns the UUIDs of the nodes released.
	ReleaseDead(ctx context.Context) ([]string, error)

	// CreatePort stores a new port (p.UUID set by the caller), lower-casing
	// p.Address and setting CreatedAt. The node must exist (ErrNotFound naming
	// it); the address must be unused (ErrDuplicateMAC).
	CreatePort(ctx context.Context, p *proto.Port) error
	GetPort(ctx context.Context, uuid string) (*proto.Port, error)
	// GetPortByAddress finds a port by MAC, case-insensitively.
	GetPortByAddress(ctx context.Context, mac string) (*proto.Port, error)
	ListPorts(ctx context.Context, q PortQuery) ([]*proto.Port, error)
	// UpdatePort is UpdateNode for ports; fn may move the port to another
	// node by changing NodeUUID (ErrNotFound if that node does not exist).
	UpdatePort(ctx context.Context, uuid string, fn func(p *proto.Port) error) (*proto.Port, error)
	DeletePort(ctx context.Context, uuid string) error

	// AddHistory appends an event to the node's history, setting UUID and
	// CreatedAt if empty. ErrNotFound if the node does not exist.
	AddHistory(ctx context.Context, nodeUUID string, ev proto.HistoryEvent) error
	// ListHistory returns the node's events, oldest first.
	ListHistory(ctx context.Context, nodeUUID string) ([]proto.HistoryEvent, error)

	// PutInventory stores (replaces) the node's inspection data.
	PutInventory(ctx context.Context, nodeUUID string, inventory, pluginData json.RawMessage) error
	// GetInventory returns the stored data; ErrNotFound if the node has none.
	GetInventory(ctx context.Context, nodeUUID string) (inventory, pluginData json.RawMessage, err error)

	// RegisterConductor inserts or updates a conductor and marks it alive
	// (online, heartbeat now). CreatedAt is kept across re-registrations.
	RegisterConductor(ctx context.Context, c Conductor) error
	// HeartbeatConductor records a heartbeat; ErrNotFound if not registered.
	// It does not bring an unregistered (offline) conductor back.
	HeartbeatConductor(ctx context.Context, hostname string) error
	// UnregisterConductor marks the conductor offline (it stays listed, not
	// alive); its reservations become free to take.
	UnregisterConductor(ctx context.Context, hostname string) error
	// ListConductors lists conductors by hostname, only the alive ones if asked.
	ListConductors(ctx context.Context, aliveOnly bool) ([]Conductor, error)

	Close() error
}

// Conductor is one controller process as registered in the store.
type Conductor struct {
	Hostname  string
	Group     string
	Drivers   []string
	UpdatedAt time.Time // last heartbeat
	CreatedAt time.Time
	// Alive is computed: online and a heartbeat within DeadAfter. Ignored by
	// RegisterConductor.
	Alive bool
}

// NodeQuery filters, sorts and pages ListNodes. Empty strings and nil
// pointers mean "no filter".
type NodeQuery struct {
	ProvisionState, Driver, ConductorGroup, ResourceClass, InstanceUUID, Owner, Fault string
	ChassisUUID                                                                       string
	Maintenance                                                                       *bool
	Associated                                                                        *bool // true: instance_uuid is set
	// Shards keeps the nodes in any of these shards (1.82); Sharded, when
	// set, those with (true) or without (false) a shard.
	Shards  []string
	Sharded *bool
	// ParentNode keeps the children of this node UUID (1.83); NoChildren
	// leaves child nodes out, as Ironic's lists do unless asked.
	ParentNode string
	NoChildren bool
	// InstanceName is an exact match on instance_name (1.104).
	InstanceName string
	// Retired, when set, keeps the retired (true) or other nodes (1.61);
	// Lessee and Conductor are exact matches (1.65, 1.49);
	// DescriptionContains keeps nodes whose description contains it,
	// ignoring ASCII case (1.51).
	Retired                                *bool
	Lessee, Conductor, DescriptionContains string
	// Project keeps the nodes it owns or leases (owner or lessee equal).
	Project string
	Limit   int // 0 = no limit
	// Marker is a node UUID: return the nodes after it in the sort order
	// (ErrNotFound if no such node).
	Marker string
	// SortKey is one of NodeSortKeys; "" = "id" = insertion order.
	SortKey string
	SortDir string // "asc" (default) or "desc"
	// Summary returns nodes with only the fields of Ironic's default list
	// view filled in (uuid, name, instance_uuid, power_state,
	// provision_state, maintenance) and the reservation, read from indexed
	// columns without decoding each node's document: the hot path of
	// GET /v1/nodes.
	Summary bool
}

// PortQuery filters, sorts and pages ListPorts. NodeUUID and Address are
// exact matches (Address case-insensitive); a NodeUUID naming no node gives an
// empty list. Name is an exact match on the port's unique name.
type PortQuery struct {
	NodeUUID, Address, Name string
	PortgroupUUID           string // exact: the ports of one port group
	// ConductorGroups and Shards keep the ports whose node is in any of
	// these conductor groups (1.99) or shards (1.82).
	ConductorGroups, Shards []string
	Limit                   int
	Marker                  string // port UUID
	SortKey                 string // one of PortSortKeys; "" = insertion order
	SortDir                 string
	// Summary returns ports with only UUID and Address, read from their
	// columns without decoding documents: the hot path of GET /v1/ports.
	Summary bool
	// DescriptionContains keeps the ports whose description contains it,
	// ignoring case (1.97).
	DescriptionContains string
	docs                *[][]byte // ListPortDocs: collect documents, decode none
}

// NodeSortKeys are the accepted NodeQuery.SortKey values (node field names).
var NodeSortKeys = []string{"id", "uuid", "name", "created_at", "updated_at", "provision_state",
	"power_state", "driver", "maintenance", "instance_uuid", "conductor_group", "resource_class",
	"owner", "fault", "reservation", "provision_updated_at"}

// PortSortKeys are the accepted PortQuery.SortKey values.
var PortSortKeys = []string{"id", "uuid", "address", "created_at", "updated_at", "name"}

// Options tunes a Store.
type Options struct {
	// DeadAfter is how long after its last heartbeat a conductor counts as
	// dead; default 30s.
	DeadAfter time.Duration
	// Now is the clock (for tests); default time.Now.
	Now func() time.Time
}

// Open opens (creating if needed) the store named by dsn and applies the
// schema migrations it lacks. dsn is "sqlite:///path/to/kiln.db" or a bare
// path for SQLite, "postgres://..." or "postgresql://..." for PostgreSQL.
func Open(ctx context.Context, dsn string, opts Options) (Store, error) {
	if opts.DeadAfter <= 0 {
		opts.DeadAfter = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn, opts)
	default:
		path, err := sqlitePath(dsn)
		if err != nil {
			return nil, err
		}
		return openSQLite(ctx, path, opts)
	}
}
