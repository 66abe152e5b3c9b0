package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kilnhq/kiln/controller/nodework"
	"github.com/kilnhq/kiln/proto"
)

// nodeColumns are the nodes table's columns besides id, in the order
// nodeValues returns them. They index the node document (doc) for filtering,
// sorting and locking; nodeValues is the one place that derives them, so they
// cannot drift from the document.
var nodeColumns = []string{"uuid", "name", "driver", "provision_state", "power_state", "maintenance",
	"instance_uuid", "conductor_group", "resource_class", "owner", "fault", "reservation",
	"created_at", "updated_at", "provision_updated_at", "chassis_uuid", "shard", "parent_node", "instance_name", "doc", "masked_doc",
	"work_now", "wait_heartbeat", "wait_since", "retired", "lessee", "conductor", "description"}

// nodeValues extracts the indexed columns and the JSON document from n. The
// document leaves out Reservation (the reservation column is authoritative, so
// Reserve can be one conditional UPDATE) and the links the API adds.
func nodeValues(n *proto.Node) ([]any, error) {
	doc := *n
	doc.Reservation = nil
	doc.Links, doc.Ports, doc.States, doc.Portgroups, doc.Volume = nil, nil, nil, nil, nil
	b, err := json.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("encode node %s: %w", n.UUID, err)
	}
	masked, err := maskedDocOf(b)
	if err != nil {
		return nil, fmt.Errorf("encode node %s: %w", n.UUID, err)
	}
	w := nodework.WaitOf(n)
	power := ""
	if n.PowerState != nil {
		power = string(*n.PowerState)
	}
	return []any{n.UUID, nullable(n.Name), n.Driver, string(n.ProvisionState), power, n.Maintenance,
		deref(n.InstanceUUID), n.ConductorGroup, deref(n.ResourceClass), deref(n.Owner), deref(n.Fault),
		nullable(n.Reservation), micros(n.CreatedAt), micros(n.UpdatedAt), micros(n.ProvisionUpdatedAt), chassisRef(n.ChassisUUID),
		chassisRef(n.Shard), chassisRef(n.ParentNode), chassisRef(n.InstanceName), string(b), string(masked),
		nodework.Now(n), waitMicros(w.LastHeartbeat), waitMicros(w.Since),
		n.Retired, nullable(n.Lessee), nullable(n.Conductor), nullable(n.Description)}, nil
}

// chassisRef is a nullable reference column (nodes.chassis_uuid, shard,
// parent_node, instance_name; ports.portgroup_uuid): NULL for nil or "".
func chassisRef(s *string) any {
	if s == nil || *s == "" {
		return nil
	}
	return *s
}

// decodeNode rebuilds a node from its document and reservation column.
func decodeNode(doc []byte, reservation *string) (*proto.Node, error) {
	n := new(proto.Node)
	if err := json.Unmarshal(doc, n); err != nil {
		return nil, fmt.Errorf("decode stored node: %w", err)
	}
	n.Reservation = reservation
	return n, nil
}

// nodeSortExprs maps sort keys to SQL expressions. Nullable columns are
// coalesced so that NULLs sort like "" in every dialect (SQLite and
// PostgreSQL disagree on where NULLs go) and marker comparisons work.
var nodeSortExprs = map[string]string{
	"id": "id", "uuid": "uuid", "name": "COALESCE(name, '')", "created_at": "created_at",
	"updated_at": "updated_at", "provision_state": "provision_state", "power_state": "power_state",
	"driver": "driver", "maintenance": "maintenance", "instance_uuid": "instance_uuid",
	"conductor_group": "conductor_group", "resource_class": "resource_class", "owner": "owner",
	"fault": "fault", "reservation": "COALESCE(reservation, '')", "provision_updated_at": "provision_updated_at",
}

// portColumns are the ports table's columns besides id and node_id.
var portColumns = []string{"uuid", "address", "name", "created_at", "updated_at", "portgroup_uuid", "doc"}

// portValues normalizes p.Address to lower case and extracts the columns.
func portValues(p *proto.Port) ([]any, error) {
	p.Address = strings.ToLower(p.Address)
	doc := *p
	doc.Links = nil
	b, err := json.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("encode port %s: %w", p.UUID, err)
	}
	return []any{p.UUID, p.Address, nullable(p.Name), micros(p.CreatedAt), micros(p.UpdatedAt), chassisRef(p.PortgroupUUID), string(b)}, nil
}

func decodePort(doc []byte) (*proto.Port, error) {
	p := new(proto.Port)
	if err := json.Unmarshal(doc, p); err != nil {
		return nil, fmt.Errorf("decode stored port: %w", err)
	}
	return p, nil
}

var portSortExprs = map[string]string{
	"id": "id", "uuid": "uuid", "address": "address", "created_at": "created_at", "updated_at": "updated_at",
	"name": "COALESCE(name, '')",
}

// orderBy validates a sort key and direction against exprs.
func orderBy(exprs map[string]string, key, dir string) (expr string, desc bool, err error) {
	if key == "" {
		key = "id"
	}
	expr, ok := exprs[key]
	if !ok {
		return "", false, fmt.Errorf("%w %q", ErrBadSortKey, key)
	}
	switch strings.ToLower(dir) {
	case "", "asc":
	case "desc":
		desc = true
	default:
		return "", false, fmt.Errorf("%w: sort direction %q (want asc or desc)", ErrBadQuery, dir)
	}
	return expr, desc, nil
}

func nullable(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// micros is a timestamp column value: microseconds since the epoch, 0 for none.
func micros(t *proto.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixMicro()
}

// wireTime normalizes t the way proto.Time travels (UTC, microseconds), so a
// value read back from the database equals the one written.
func wireTime(t time.Time) *proto.Time {
	return &proto.Time{Time: t.UTC().Truncate(time.Microsecond)}
}
