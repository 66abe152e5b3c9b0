package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// NodeHardware stores what a node's BMC reported of its hardware
// configuration: BIOS settings and firmware components. The conductor
// replaces a node's set whole after reading it from the BMC; the API reads
// it. Rows go with their node.
type NodeHardware struct {
	s *sqlStore
}

// NewNodeHardware serves node hardware records from st: a Store that Open
// returned, or a wrapper of one (Unwrapper).
func NewNodeHardware(st Store) (*NodeHardware, error) {
	for {
		w, ok := st.(Unwrapper)
		if !ok {
			break
		}
		st = w.Unwrap()
	}
	s, ok := st.(*sqlStore)
	if !ok {
		return nil, fmt.Errorf("node hardware: store %T is not an SQL store", st)
	}
	return &NodeHardware{s: s}, nil
}

// Limits on what one node may store, so a misbehaving BMC cannot fill the
// database: real BIOSes have a few hundred to a few thousand attributes.
const (
	MaxBIOSSettings       = 10000
	MaxFirmwareComponents = 1000
)

// rowSet describes one per-node table keyed by (node_id, key).
type rowSet[T any] struct {
	kind, table, key string
	max              int
	keyOf            func(*T) string
	times            func(*T) (created, updated **proto.Time)
}

var biosRows = rowSet[proto.BIOSSetting]{
	kind: "BIOS setting", table: "node_bios", key: "name", max: MaxBIOSSettings,
	keyOf: func(b *proto.BIOSSetting) string { return b.Name },
	times: func(b *proto.BIOSSetting) (**proto.Time, **proto.Time) { return &b.CreatedAt, &b.UpdatedAt },
}

var firmwareRows = rowSet[proto.FirmwareComponent]{
	kind: "firmware component", table: "node_firmware", key: "component", max: MaxFirmwareComponents,
	keyOf: func(f *proto.FirmwareComponent) string { return f.Component },
	times: func(f *proto.FirmwareComponent) (**proto.Time, **proto.Time) { return &f.CreatedAt, &f.UpdatedAt },
}

// ReplaceBIOS makes settings the node's BIOS settings, as Ironic caches
// them: new names are created, changed values updated (updated_at set),
// names no longer reported deleted, unchanged rows left alone.
func (h *NodeHardware) ReplaceBIOS(ctx context.Context, nodeUUID string, settings []proto.BIOSSetting) error {
	return replaceRows(ctx, h.s, biosRows, nodeUUID, settings)
}

// ListBIOS returns the node's BIOS settings by name; ErrNotFound if the
// node does not exist.
func (h *NodeHardware) ListBIOS(ctx context.Context, nodeUUID string) ([]proto.BIOSSetting, error) {
	return listRows(ctx, h.s, biosRows, nodeUUID, "")
}

// GetBIOS returns one BIOS setting; ErrNotFound if the node has none of
// that name.
func (h *NodeHardware) GetBIOS(ctx context.Context, nodeUUID, name string) (*proto.BIOSSetting, error) {
	out, err := listRows(ctx, h.s, biosRows, nodeUUID, name)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("BIOS setting %s of node %s: %w", name, nodeUUID, ErrNotFound)
	}
	return &out[0], nil
}

// ReplaceFirmware makes comps the node's firmware components (created,
// updated, deleted as ReplaceBIOS does).
func (h *NodeHardware) ReplaceFirmware(ctx context.Context, nodeUUID string, comps []proto.FirmwareComponent) error {
	return replaceRows(ctx, h.s, firmwareRows, nodeUUID, comps)
}

// ListFirmware returns the node's firmware components by name.
func (h *NodeHardware) ListFirmware(ctx context.Context, nodeUUID string) ([]proto.FirmwareComponent, error) {
	return listRows(ctx, h.s, firmwareRows, nodeUUID, "")
}

// bare is v's stored document: without timestamps (they are columns).
func bare[T any](rs rowSet[T], v T) (string, error) {
	c, u := rs.times(&v)
	*c, *u = nil, nil
	b, err := json.Marshal(v)
	return string(b), err
}

func replaceRows[T any](ctx context.Context, s *sqlStore, rs rowSet[T], nodeUUID string, items []T) error {
	if len(items) > rs.max {
		return fmt.Errorf("store %ss of node %s: %d is more than the %d allowed", rs.kind, nodeUUID, len(items), rs.max)
	}
	want := make(map[string]string, len(items))
	for _, v := range items {
		k := rs.keyOf(&v)
		if k == "" {
			return fmt.Errorf("store %ss of node %s: one has no %s", rs.kind, nodeUUID, rs.key)
		}
		if _, dup := want[k]; dup {
			return fmt.Errorf("store %ss of node %s: %s %q given twice", rs.kind, nodeUUID, rs.key, k)
		}
		doc, err := bare(rs, v)
		if err != nil {
			return fmt.Errorf("store %s %s of node %s: %w", rs.kind, k, nodeUUID, err)
		}
		want[k] = doc
	}
	now := s.now().UnixMicro()
	doing := fmt.Sprintf("store %ss of node %s", rs.kind, nodeUUID)
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		id, err := s.nodeID(ctx, tx, nodeUUID)
		if err != nil {
			return fmt.Errorf("%s: %w", doing, err)
		}
		rows, err := s.query(ctx, tx, "SELECT "+rs.key+", doc FROM "+rs.table+" WHERE node_id = ?", id)
		if err != nil {
			return fmt.Errorf("%s: %w", doing, err)
		}
		have := map[string]string{}
		for rows.Next() {
			var k, doc string
			if err := rows.Scan(&k, &doc); err != nil {
				rows.Close()
				return fmt.Errorf("%s: %w", doing, err)
			}
			have[k] = doc
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("%s: %w", doing, err)
		}
		for k := range have {
			if _, keep := want[k]; !keep {
				if _, err := s.exec(ctx, tx, "DELETE FROM "+rs.table+" WHERE node_id = ? AND "+rs.key+" = ?", id, k); err != nil {
					return fmt.Errorf("%s: delete %s: %w", doing, k, err)
				}
			}
		}
		for k, doc := range want {
			old, ok := have[k]
			switch {
			case !ok:
				_, err = s.exec(ctx, tx, "INSERT INTO "+rs.table+" (node_id, "+rs.key+", created_at, updated_at, doc) VALUES (?, ?, ?, 0, ?)", id, k, now, doc)
			case old != doc:
				_, err = s.exec(ctx, tx, "UPDATE "+rs.table+" SET doc = ?, updated_at = ? WHERE node_id = ? AND "+rs.key+" = ?", doc, now, id, k)
			}
			if err != nil {
				return fmt.Errorf("%s: %s: %w", doing, k, err)
			}
		}
		return nil
	})
}

// listRows reads a node's rows in key order; only the row named key when
// key is not empty.
func listRows[T any](ctx context.Context, s *sqlStore, rs rowSet[T], nodeUUID, key string) ([]T, error) {
	doing := fmt.Sprintf("list %ss of node %s", rs.kind, nodeUUID)
	id, err := s.nodeID(ctx, s.rdb, nodeUUID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, err)
	}
	q := "SELECT created_at, updated_at, doc FROM " + rs.table + " WHERE node_id = ?"
	args := []any{id}
	if key != "" {
		q += " AND " + rs.key + " = ?"
		args = append(args, key)
	}
	rows, err := s.query(ctx, s.rdb, q+" ORDER BY "+rs.key, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var created, updated int64
		var doc string
		if err := rows.Scan(&created, &updated, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", doing, err)
		}
		var v T
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			return nil, fmt.Errorf("%s: decode: %w", doing, err)
		}
		c, u := rs.times(&v)
		*c, *u = fromMicros(created), fromMicros(updated)
		out = append(out, v)
	}
	return out, rows.Err()
}

// fromMicros is a timestamp column read back: nil for 0.
func fromMicros(us int64) *proto.Time {
	if us == 0 {
		return nil
	}
	return wireTime(time.UnixMicro(us))
}
