package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/controller/nodework"
	"github.com/kilnhq/kiln/proto"
)

// WorkQuery selects, for a conductor's periodic scan, the free nodes of a
// conductor group that may need their conductor (see package nodework):
// those with work now, those whose agent has been silent since before
// HeartbeatBefore, and those waiting for a first heartbeat since before
// WaitBefore. A zero time selects no waits of its kind.
type WorkQuery struct {
	ConductorGroup  string
	HeartbeatBefore time.Time
	WaitBefore      time.Time
}

// nodesWithWorkQuery is one index seek per kind of work (migration 0033's
// partial indexes); a silent agent's node is left out when its narrow
// heartbeat stamp (agentseen.go: a primary-key read) is recent. Rows written before the migration are derived when the
// store opens (deriveWork), before any scan.
const nodesWithWorkQuery = "SELECT uuid FROM nodes WHERE work_now = TRUE AND conductor_group = ? AND reservation IS NULL" +
	" UNION SELECT uuid FROM nodes WHERE conductor_group = ? AND wait_heartbeat < ? AND reservation IS NULL" +
	" AND NOT EXISTS (SELECT 1 FROM node_agent_seen WHERE node_id = nodes.id AND last_heartbeat >= ?)" +
	" UNION SELECT uuid FROM nodes WHERE conductor_group = ? AND wait_since < ? AND reservation IS NULL"

// NodesWithWork returns the UUIDs WorkQuery selects, from indexed columns
// alone: no node's document is read.
func (s *sqlStore) NodesWithWork(ctx context.Context, q WorkQuery) ([]string, error) {
	hb, wait := int64(-1), int64(-1) // no stored time is below -1
	if !q.HeartbeatBefore.IsZero() {
		hb = q.HeartbeatBefore.UnixMicro()
	}
	if !q.WaitBefore.IsZero() {
		wait = q.WaitBefore.UnixMicro()
	}
	g := q.ConductorGroup
	rows, err := s.query(ctx, s.rdb, nodesWithWorkQuery, g, g, hb, hb, g, wait)
	if err != nil {
		return nil, fmt.Errorf("list nodes with work: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("list nodes with work: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes with work: %w", err)
	}
	return out, nil
}

// waitMicros is a wait column's value: NULL for the zero time.
func waitMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// agentWork is the work columns' change for a heartbeat RecordAgent
// writes: the same values nodeValues derives from the document it leaves,
// given that the UPDATE applies only to a node as seen. The SQL sets
// work_now and the wait columns only when the written keys change them.
func agentWork(seen AgentView, set []KeyValue) (cols string, args []any) {
	for _, kv := range set {
		switch kv.Key {
		case proto.InfoHeartbeatPending:
			cols += ", work_now = TRUE"
		case proto.InfoAgentLastHeartbeat:
			if !nodework.IsWait(seen.ProvisionState) || seen.Maintenance {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, kv.Value)
			if err != nil {
				continue // nodeValues' next write derives it
			}
			cols += ", wait_heartbeat = ?, wait_since = NULL"
			args = append(args, t.UnixMicro())
		}
	}
	return cols, args
}

// deriveWork fills in the work columns of rows written before migration
// 0033 (work_now NULL), a batch at a time; several controllers opening one
// database at once write the same values.
func deriveWork(ctx context.Context, db *sql.DB, d *dialect) error {
	for {
		rows, err := db.QueryContext(ctx, d.rebind("SELECT id, doc FROM nodes WHERE work_now IS NULL ORDER BY id LIMIT 500"))
		if err != nil {
			return fmt.Errorf("derive node work: %w", err)
		}
		type row struct {
			id  int64
			doc []byte
		}
		var batch []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.doc); err != nil {
				rows.Close()
				return fmt.Errorf("derive node work: %w", err)
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("derive node work: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("derive node work: %w", err)
		}
		for _, r := range batch {
			n, err := decodeNode(r.doc, nil)
			if err != nil {
				tx.Rollback() //nolint:errcheck // the error returned says why
				return fmt.Errorf("derive node work: %w", err)
			}
			w := nodework.WaitOf(n)
			if _, err := tx.ExecContext(ctx, d.rebind("UPDATE nodes SET work_now = ?, wait_heartbeat = ?, wait_since = ? WHERE id = ?"),
				nodework.Now(n), waitMicros(w.LastHeartbeat), waitMicros(w.Since), r.id); err != nil {
				tx.Rollback() //nolint:errcheck // the error returned says why
				return fmt.Errorf("derive node work: %w", err)
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("derive node work: %w", err)
		}
	}
}
