package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/controller/jsonscan"
	"github.com/kilnhq/kiln/proto"
)

// A periodic heartbeat whose only news is that the agent is still there
// (same URL, version, token and CA, nothing for the conductor) is recorded
// by RecordSeen in node_agent_seen (migration 0035): one narrow row per
// node, upserted, instead of the node's documents rewritten (some 4 KB on
// SQLite's single writer, at 500 a second for 10,000 agents). The stamp is
// part of driver_internal_info.agent_last_heartbeat for every reader: each
// read of a node merges it in (mergeSeen*) when the document holds that key
// and the row is newer. A document without the key (no heartbeat yet, or
// the conductor cleared it when a new wait began) ignores the row, so a
// stamp of an earlier phase never comes back.

// seenCol is a SQL expression of nodes: the node's narrow stamp
// (microseconds), NULL if none. One primary-key read, for point reads.
const seenCol = "(SELECT last_heartbeat FROM node_agent_seen WHERE node_id = nodes.id)"

// nodesSeen is nodes with their narrow stamps (seenJoined), for lists: a
// join seeks each row's stamp by primary key, where the subquery seenCol
// cost a list of versions as much again as the list itself (modernc's
// SQLite runs a correlated subquery as a subprogram per row).
const (
	nodesSeen  = "nodes LEFT JOIN node_agent_seen ON node_agent_seen.node_id = nodes.id"
	seenJoined = "node_agent_seen.last_heartbeat"
)

// seenStamp is a narrow stamp as driver_internal_info holds it: the text
// RecordAgent writes for the same time (the API truncates a narrow
// heartbeat's time to microseconds, so the text is the same).
func seenStamp(micros int64) string {
	return time.UnixMicro(micros).UTC().Format(time.RFC3339Nano)
}

// newerSeen reports whether the stamp text (the document's) is older than
// the narrow stamp micros, or unreadable while the narrow one is set.
func newerSeen(stamp string, micros int64) bool {
	t := parseStamp(stamp)
	return t.IsZero() || t.UnixMicro() < micros
}

// mergeSeenNode merges a narrow stamp (valid) into n's
// driver_internal_info.agent_last_heartbeat.
func mergeSeenNode(n *proto.Node, seen sql.NullInt64) {
	if !seen.Valid || n == nil {
		return
	}
	cur, ok := n.DriverInternalInfo[proto.InfoAgentLastHeartbeat].(string)
	if !ok || !newerSeen(cur, seen.Int64) {
		return
	}
	n.DriverInternalInfo[proto.InfoAgentLastHeartbeat] = seenStamp(seen.Int64)
}

// mergeSeenDoc is doc (a stored document, or lined: a masked one) with a
// narrow stamp merged in; doc itself when there is nothing to merge. A
// document spliceDoc cannot edit is decoded, changed and encoded.
func mergeSeenDoc(doc []byte, lined bool, seen sql.NullInt64) ([]byte, error) {
	if !seen.Valid {
		return doc, nil
	}
	cur, present, err := docStamp(doc, lined)
	if err != nil || !present || !newerSeen(cur, seen.Int64) {
		return doc, err
	}
	val, _ := json.Marshal(seenStamp(seen.Int64)) // a string always encodes
	if out, ok := spliceDoc(doc, lined, []docEdit{{"driver_internal_info", proto.InfoAgentLastHeartbeat, val}}); ok {
		return out, nil
	}
	return nil, fmt.Errorf("merge agent heartbeat: the document cannot be edited")
}

// docStamp reads driver_internal_info.agent_last_heartbeat of doc as a
// string; present is false when the key is absent or not a string.
func docStamp(doc []byte, lined bool) (stamp string, present bool, err error) {
	var dii []byte
	member := func(k, v []byte) {
		if string(k) == "driver_internal_info" {
			dii = v
		}
	}
	if lined {
		err = jsonscan.Lines(doc, member)
	} else {
		err = jsonscan.Members(doc, member)
	}
	if err != nil {
		return "", false, fmt.Errorf("read agent heartbeat: %w", err)
	}
	if len(dii) == 0 || dii[0] != '{' {
		return "", false, nil
	}
	var raw []byte
	if err := jsonscan.Members(dii, func(k, v []byte) {
		if string(k) == proto.InfoAgentLastHeartbeat {
			raw = v
		}
	}); err != nil {
		return "", false, fmt.Errorf("read agent heartbeat: %w", err)
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", false, nil
	}
	stamp, present, err = jsonText(raw)
	return stamp, present, err
}

// seenQuery reads a node's narrow stamp by node id.
const seenQuery = "SELECT last_heartbeat FROM node_agent_seen WHERE node_id = ?"

// mergeSeen merges node id's narrow stamp, read through q, into n.
func (s *sqlStore) mergeSeen(ctx context.Context, q querier, id int64, n *proto.Node) error {
	return mergeSeenRow(s.queryRow(ctx, q, seenQuery, id), n)
}

// mergeSeenTx is mergeSeen in a write transaction, through st (seenQuery
// prepared on the writer; nil: unprepared).
func (s *sqlStore) mergeSeenTx(ctx context.Context, tx *sql.Tx, st *sql.Stmt, id int64, n *proto.Node) error {
	return mergeSeenRow(s.txQueryRow(ctx, tx, st, seenQuery, id), n)
}

// mergeSeenRow merges the stamp row (seenQuery's) into n.
func mergeSeenRow(row *sql.Row, n *proto.Node) error {
	var seen sql.NullInt64
	if err := row.Scan(&seen); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read agent heartbeat of node %s: %w", n.UUID, err)
	}
	mergeSeenNode(n, seen)
	return nil
}

// recordSeenQuery upserts a narrow stamp for a node whose row is still at
// the version read, keeping the newer stamp (several controllers may
// record one node's heartbeats).
func (d *dialect) recordSeenQuery() string {
	greatest := "max"
	if d.numbered {
		greatest = "GREATEST"
	}
	return "INSERT INTO node_agent_seen (node_id, last_heartbeat) SELECT id, ? FROM nodes WHERE id = ? AND row_version = ?" +
		" ON CONFLICT (node_id) DO UPDATE SET last_heartbeat = " + greatest + "(node_agent_seen.last_heartbeat, excluded.last_heartbeat)"
}

// RecordSeen records that seen's agent heartbeat at at, as a narrow stamp,
// while the node's row is still the one AgentOf read (its row version): ok
// is false when it changed, and the caller decides again on the current
// node. at is truncated to microseconds. Stamps recorded at the same time
// are committed together (seenbatch.go); RecordSeen returns once its own
// is.
func (s *sqlStore) RecordSeen(ctx context.Context, seen AgentView, at time.Time) (bool, error) {
	if seen.id == 0 {
		return false, errors.New("record agent heartbeat: the view was not read by AgentOf")
	}
	ok, err := s.seen.record(ctx, &seenReq{id: seen.id, rowVersion: seen.rowVersion, micros: at.UnixMicro()}, s.writeSeen)
	if err != nil {
		return false, fmt.Errorf("record agent heartbeat of node %s: %w", seen.UUID, err)
	}
	return ok, nil
}

// writeSeen writes a group of narrow stamps: a lone one as a statement of
// its own (BEGIN and COMMIT would cost it as much again), several in one
// transaction, through the upsert prepared on the writer. A committed
// group counts as one record_seen write.
func (s *sqlStore) writeSeen(ctx context.Context, group []*seenReq) error {
	query := s.d.recordSeenQuery()
	if len(group) == 1 {
		r := group[0]
		changed, err := s.execWrite(ctx, query, r.micros, r.id, r.rowVersion)
		if err != nil {
			return err
		}
		r.ok = changed == 1
		s.wrote(writeRecordSeen)
		return nil
	}
	st := s.preparedWrite(ctx, query)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var txst *sql.Stmt
		if st != nil {
			txst = tx.StmtContext(ctx, st)
		}
		for _, r := range group {
			var (
				res sql.Result
				err error
			)
			if txst != nil {
				res, err = txst.ExecContext(ctx, r.micros, r.id, r.rowVersion)
			} else {
				res, err = s.exec(ctx, tx, query, r.micros, r.id, r.rowVersion)
			}
			if err != nil {
				return err
			}
			changed, err := res.RowsAffected()
			if err != nil {
				return err
			}
			r.ok = changed == 1
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.wrote(writeRecordSeen)
	return nil
}
