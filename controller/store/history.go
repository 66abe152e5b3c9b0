package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/proto"
)

// historyNodeQuery reads what historyDoc records of the node;
// historyInsertQuery stores the event.
const (
	historyNodeQuery   = "SELECT provision_state, provision_updated_at, doc FROM nodes WHERE uuid = ?"
	historyInsertQuery = "INSERT INTO node_history (uuid, node_id, created_at, doc) " +
		"SELECT CAST(? AS TEXT), id, CAST(? AS BIGINT), CAST(? AS TEXT) FROM nodes WHERE uuid = ?"
)

// historyDoc is a history event's document, with the node's provision
// state, target and the seconds since its last provision change recorded
// with it (Ironic's history fields of microversion 1.115), read in the
// transaction that stores the event, through st (historyNodeQuery
// prepared on the writer; nil: unprepared).
func (s *sqlStore) historyDoc(ctx context.Context, tx *sql.Tx, st *sql.Stmt, nodeUUID string, ev proto.HistoryEvent) (string, error) {
	var state string
	var updated int64
	var doc []byte
	err := s.txQueryRow(ctx, tx, st, historyNodeQuery, nodeUUID).Scan(&state, &updated, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("node %s: %w", nodeUUID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("add history event to node %s: %w", nodeUUID, err)
	}
	var target struct {
		Target *string `json:"target_provision_state"`
	}
	if ev.State == "" {
		if err := json.Unmarshal(doc, &target); err != nil {
			return "", fmt.Errorf("decode stored node %s: %w", nodeUUID, err)
		}
	}
	return historyEventDoc(nodeUUID, ev, state, target.Target, updated)
}

// historyEventDoc is ev's document recording, unless ev names a state
// already, the node's provision state, target and the seconds since its
// last provision change (updated, µs; 0: none).
func historyEventDoc(nodeUUID string, ev proto.HistoryEvent, state string, target *string, updated int64) (string, error) {
	if ev.State == "" {
		ev.State = state
		ev.TargetProvisionState = target
		if updated > 0 && ev.DurationSeconds == nil {
			d := (micros(ev.CreatedAt) - updated) / 1_000_000
			ev.DurationSeconds = &d
		}
	}
	b, err := json.Marshal(&ev)
	if err != nil {
		return "", fmt.Errorf("encode history event of node %s: %w", nodeUUID, err)
	}
	return string(b), nil
}
