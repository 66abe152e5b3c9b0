package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// The default node list reads seven columns per node. modernc's SQLite
// driver pays per column read (a type query and a text read, each taking
// the connection's mutex, and a string allocated per value): with seven
// columns that was two fifths of the list's CPU, more than SQLite's own
// work. summaryRow joins the seven into one text value per row, built by
// SQLite, which the store splits without copying.

// summarySep separates summaryRow's parts; no part can hold it (names are
// logical names, the rest UUIDs, states, a flag and a host name), and a row
// that has it anyway is read again column by column (splitSummary).
const summarySep = "\x1f"

// summaryRow is the one column of a node summary: uuid, name, instance_uuid,
// power_state, provision_state, maintenance ("1" or "0") and reservation,
// each nullable one written "=value" or "" for NULL.
const summaryRow = "uuid || '" + summarySep + "' || COALESCE('=' || name, '') || '" + summarySep +
	"' || instance_uuid || '" + summarySep + "' || power_state || '" + summarySep +
	"' || provision_state || '" + summarySep + "' || CASE WHEN maintenance THEN '1' ELSE '0' END || '" +
	summarySep + "' || COALESCE('=' || reservation, '')"

// summaryColumns is the column form, for a page where a row did not split.
const summaryColumns = "uuid, name, instance_uuid, power_state, provision_state, maintenance, reservation"

// NodeSummary is a node as Ironic's default list shows it (the
// proto.NodeDefaultListFields and the reservation). Its strings may share
// memory with the row read.
type NodeSummary struct {
	UUID           string
	Name           *string
	InstanceUUID   string // "" for none
	PowerState     string // "" for none
	ProvisionState proto.ProvisionState
	Maintenance    bool
	Reservation    *string
}

// Node is s as a node with only its summary fields set.
func (s *NodeSummary) Node() *proto.Node {
	n := &proto.Node{UUID: s.UUID, Name: s.Name, ProvisionState: s.ProvisionState, Maintenance: s.Maintenance,
		Reservation: s.Reservation}
	if s.InstanceUUID != "" {
		inst := s.InstanceUUID
		n.InstanceUUID = &inst
	}
	if s.PowerState != "" {
		ps := proto.PowerState(s.PowerState)
		n.PowerState = &ps
	}
	return n
}

// NodeSummaries reads the default node list without building nodes.
type NodeSummaries interface {
	// ListNodeSummaries is ListNodes with Summary, as summaries.
	ListNodeSummaries(ctx context.Context, q NodeQuery) ([]NodeSummary, error)
}

// SummariesOf is st's NodeSummaries, through wrappers (Unwrapper); false
// if it has none.
func SummariesOf(st Store) (NodeSummaries, bool) {
	for {
		if v, ok := st.(NodeSummaries); ok {
			return v, true
		}
		w, ok := st.(Unwrapper)
		if !ok {
			return nil, false
		}
		st = w.Unwrap()
	}
}

// listNodeSummaries is ListNodes with Summary: columns only, no documents.
func (s *sqlStore) listNodeSummaries(ctx context.Context, where []string, args []any, q NodeQuery) ([]*proto.Node, error) {
	sums, err := s.summaries(ctx, where, args, q)
	if err != nil {
		return nil, err
	}
	out := make([]*proto.Node, len(sums))
	for i := range sums {
		out[i] = sums[i].Node()
	}
	return out, nil
}

func (s *sqlStore) ListNodeSummaries(ctx context.Context, q NodeQuery) ([]NodeSummary, error) {
	where, args := nodeWhere(q)
	return s.summaries(ctx, where, args, q)
}

// summaries reads a page of summaries, one text value per row.
func (s *sqlStore) summaries(ctx context.Context, where []string, args []any, q NodeQuery) ([]NodeSummary, error) {
	rows, err := s.list(ctx, "nodes", summaryRow, nodeSortExprs, where, args, q.SortKey, q.SortDir, q.Marker, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	out := make([]NodeSummary, 0, min(max(q.Limit, 1), 1000))
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		var sum NodeSummary
		if !splitSummary(row, &sum) {
			rows.Close()
			return s.summaryCols(ctx, where, args, q)
		}
		out = append(out, sum)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// splitSummary reads row (summaryRow) into sum; false when row does not
// have exactly its seven well-formed parts.
func splitSummary(row string, sum *NodeSummary) bool {
	var part [7]string
	for i := range len(part) - 1 {
		var ok bool
		if part[i], row, ok = strings.Cut(row, summarySep); !ok {
			return false
		}
	}
	if strings.Contains(row, summarySep) {
		return false
	}
	part[6] = row
	*sum = NodeSummary{UUID: part[0], InstanceUUID: part[2], PowerState: part[3], ProvisionState: proto.ProvisionState(part[4])}
	var ok bool
	if sum.Name, ok = nullablePart(part[1]); !ok {
		return false
	}
	if sum.Reservation, ok = nullablePart(part[6]); !ok {
		return false
	}
	switch part[5] {
	case "1":
		sum.Maintenance = true
	case "0":
	default:
		return false
	}
	return true
}

// nullablePart reads a nullable part of summaryRow: "" is NULL, "=v" is v.
func nullablePart(p string) (*string, bool) {
	if p == "" {
		return nil, true
	}
	v, ok := strings.CutPrefix(p, "=")
	if !ok {
		return nil, false
	}
	return &v, true
}

// summaryCols is summaries reading each column on its own.
func (s *sqlStore) summaryCols(ctx context.Context, where []string, args []any, q NodeQuery) ([]NodeSummary, error) {
	rows, err := s.list(ctx, "nodes", summaryColumns, nodeSortExprs, where, args, q.SortKey, q.SortDir, q.Marker, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []NodeSummary
	for rows.Next() {
		var sum NodeSummary
		var name, res sql.NullString
		var prov string
		if err := rows.Scan(&sum.UUID, &name, &sum.InstanceUUID, &sum.PowerState, &prov, &sum.Maintenance, &res); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		if name.Valid {
			sum.Name = &name.String
		}
		sum.ProvisionState = proto.ProvisionState(prov)
		if res.Valid {
			sum.Reservation = &res.String
		}
		out = append(out, sum)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}
