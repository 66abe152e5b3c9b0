package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// UpdateNode is optimistic. On SQLite every write goes through one
// connection, so whatever a write transaction does is serialized with
// every other write of the controller; reading the row, decoding the
// document, running fn, encoding and masking the result was half of an
// UpdateNode's CPU, and all of it was done holding that connection. Now
// all of it is done outside any transaction, on a row read through the
// reader pool, and the writer runs one conditional UPDATE of the changed
// columns that applies only if the row is still the version that was read
// (nodes.row_version, bumped by every write of a node: noderowversion.go).
// When another write came in between, nothing is written and the node is
// read again and fn run again on it; after optimisticAttempts such losses
// the update runs the old way, in a transaction holding the row, so that
// it always makes progress. On PostgreSQL the conditional UPDATE is atomic
// under READ COMMITTED as well (a row changed meanwhile is re-checked
// against the WHERE clause and skipped), and the row lock is then held for
// one statement instead of a read, a round trip and a write.

// optimisticAttempts is how many times UpdateNode tries the optimistic
// path before taking the row lock.
const optimisticAttempts = 4

func (s *sqlStore) UpdateNode(ctx context.Context, ident string, fn func(n *proto.Node) error) (*proto.Node, error) {
	return s.updateNode(ctx, ident, fn, nil)
}

func (s *sqlStore) UpdateNodeWithHistory(ctx context.Context, ident string, fn func(n *proto.Node) error, events []proto.HistoryEvent) (*proto.Node, error) {
	return s.updateNode(ctx, ident, fn, events)
}

func (s *sqlStore) updateNode(ctx context.Context, ident string, fn func(n *proto.Node) error, events []proto.HistoryEvent) (*proto.Node, error) {
	n, _, err := s.updateNodeKept(ctx, ident, fn, events, false)
	return n, err
}

// updateNodeKept is updateNode; keep asks for the version written as a
// HeldNode (heldnode.go), which the locked fallback does not give (nil).
func (s *sqlStore) updateNodeKept(ctx context.Context, ident string, fn func(n *proto.Node) error, events []proto.HistoryEvent, keep bool) (*proto.Node, *HeldNode, error) {
	for attempt := 1; attempt <= optimisticAttempts; attempt++ {
		n, h, done, err := s.tryUpdateNode(ctx, ident, fn, events, keep)
		if done {
			return n, h, err
		}
	}
	n, err := s.updateNodeLocked(ctx, ident, fn, events)
	return n, nil, err
}

// errLostRace ends a write transaction whose conditional UPDATE found the
// row changed since it was read.
var errLostRace = errors.New("the node changed since it was read")

// tryUpdateNode is one optimistic attempt; done is false when the row
// changed between the read and the write (nothing was written).
func (s *sqlStore) tryUpdateNode(ctx context.Context, ident string, fn func(n *proto.Node) error, events []proto.HistoryEvent, keep bool) (out *proto.Node, h *HeldNode, done bool, err error) {
	id, version, stored, n, err := s.readNodeForUpdate(ctx, ident)
	if err != nil {
		return nil, nil, true, err
	}
	return s.writeNodeVersion(ctx, ident, id, version, stored, n, fn, events, keep)
}

// writeNodeVersion runs fn on n, the node of row id at version (stored:
// its columns), and writes the result if the row is still at that
// version; done is false when it was not (nothing was written). keep
// asks for the version written as a HeldNode.
func (s *sqlStore) writeNodeVersion(ctx context.Context, ident string, id, version int64, stored []any, n *proto.Node, fn func(n *proto.Node) error, events []proto.HistoryEvent, keep bool) (out *proto.Node, h *HeldNode, done bool, err error) {
	uuid := n.UUID
	was := stateOf(n)
	if err := fn(n); err != nil {
		return nil, nil, true, err
	}
	docs, err := historyDocs(uuid, was, events)
	if err != nil {
		return nil, nil, true, err
	}
	if n.UUID != uuid {
		return nil, nil, true, fmt.Errorf("update node %s: the UUID cannot change (to %q)", uuid, n.UUID)
	}
	n.UpdatedAt = wireTime(s.clock())
	vals, err := nodeValues(n)
	if err != nil {
		return nil, nil, true, err
	}
	m := changedColumns(stored, vals)
	if s.beforeNodeWrite != nil {
		s.beforeNodeWrite(uuid)
	}
	query := updateNodeColumns(m) + " AND row_version = ?"
	args := append(maskedArgs(m, vals, id), version)
	var changed int64
	if len(docs) == 0 {
		changed, err = s.execWrite(ctx, query, args...)
	} else {
		changed, err = s.writeWithHistory(ctx, query, args, uuid, events, docs)
	}
	if errors.Is(err, errLostRace) {
		changed, err = 0, nil
	}
	if err != nil {
		return nil, nil, true, s.mapWriteError(err, "update node "+ident)
	}
	if changed == 0 {
		s.wrote(writeUpdateNodeLost)
		return nil, nil, false, nil
	}
	s.wrote(writeUpdateNode)
	if keep {
		// The UPDATE applied only at version and bumped it by one.
		h = &HeldNode{id: id, version: version + 1, stored: vals, n: cloneNode(n)}
	}
	return n, h, true, nil
}

// writeWithHistory runs the conditional UPDATE and inserts the history
// events (docs: their documents) in one transaction, when the UPDATE
// changed the row.
func (s *sqlStore) writeWithHistory(ctx context.Context, query string, args []any, uuid string, events []proto.HistoryEvent, docs []string) (int64, error) {
	upd, ins := s.preparedWrite(ctx, query), s.preparedWrite(ctx, historyInsertQuery)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := s.txExec(ctx, tx, upd, query, args...)
		if err != nil {
			return err
		}
		if k, err := r.RowsAffected(); err != nil {
			return err
		} else if k == 0 {
			return errLostRace
		}
		return s.insertHistory(ctx, tx, ins, uuid, events, docs)
	})
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// insertHistory stores events (docs: their documents) in tx through ins
// (historyInsertQuery prepared on the writer; nil: unprepared).
func (s *sqlStore) insertHistory(ctx context.Context, tx *sql.Tx, ins *sql.Stmt, uuid string, events []proto.HistoryEvent, docs []string) error {
	for i, ev := range events {
		r, err := s.txExec(ctx, tx, ins, historyInsertQuery, ev.UUID, micros(ev.CreatedAt), docs[i], uuid)
		if err := affectedOne(r, err, "add history event to node "+uuid, "node "+uuid); err != nil {
			return err
		}
	}
	return nil
}

// provisionState is what a history event records of its node.
type provisionState struct {
	state   string
	target  *string
	updated int64 // provision_updated_at, µs; 0: none
}

func stateOf(n *proto.Node) provisionState {
	p := provisionState{state: string(n.ProvisionState), updated: micros(n.ProvisionUpdatedAt)}
	if t := n.TargetProvisionState; t != nil {
		p.target = (*string)(t)
	}
	return p
}

// historyDocs is each event's document, as AddHistory would record it
// with the node in state was (the node before the update): events that
// name no State record was. Events without a UUID or a time are refused:
// they are fixed by the caller, once, as fn may run several times.
func historyDocs(uuid string, was provisionState, events []proto.HistoryEvent) ([]string, error) {
	docs := make([]string, len(events))
	for i, ev := range events {
		if ev.UUID == "" || ev.CreatedAt == nil {
			return nil, fmt.Errorf("history event of node %s: no UUID or time", uuid)
		}
		ev.Links = nil
		d, err := historyEventDoc(uuid, ev, was.state, was.target, was.updated)
		if err != nil {
			return nil, err
		}
		docs[i] = d
	}
	return docs, nil
}

// readNodeForUpdate reads, without a transaction, what UpdateNode
// compares and its version: the row's id and row_version, and every column
// of nodeColumns in order (masked_doc read as NULL, nodeSelectForUpdate's
// shape), and the node decoded from them.
func (s *sqlStore) readNodeForUpdate(ctx context.Context, ident string) (id, version int64, stored []any, n *proto.Node, err error) {
	stored = make([]any, len(nodeColumns))
	dest := make([]any, len(nodeColumns)+2)
	dest[0], dest[1] = &id, &version
	for i := range stored {
		dest[i+2] = &stored[i]
	}
	if s.onNodeRead != nil {
		s.onNodeRead(ident)
	}
	err = s.queryRow(ctx, s.rdb, s.nodeSelectVersioned(), ident, ident, ident).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil, nil, fmt.Errorf("node %s: %w", ident, ErrNotFound)
	}
	if err != nil {
		return 0, 0, nil, nil, fmt.Errorf("get node %s: %w", ident, err)
	}
	n, err = storedNode(ident, stored)
	if err == nil {
		// The agent's newer narrow heartbeat stamp (agentseen.go) goes
		// into the document, so that this write keeps it, as the
		// locked path does.
		err = s.mergeSeen(ctx, s.rdb, id, n)
	}
	if err != nil {
		return 0, 0, nil, nil, err
	}
	return id, version, stored, n, nil
}

// nodeSelectVersioned is nodeSelectForUpdate's query with the row's
// version after its id, without the row lock.
func (s *sqlStore) nodeSelectVersioned() string {
	q := strings.Replace(s.nodeSelectForUpdate(), "SELECT id, ", "SELECT id, row_version, ", 1)
	return strings.TrimSuffix(q, s.d.forUpdate)
}

// NodeHistoryWriter is a Store that stores a node's update and events of
// its history in one write: the conductor records a pass's history with
// the pass's commit, where each event used to be a write of its own.
type NodeHistoryWriter interface {
	// UpdateNodeWithHistory is UpdateNode that also appends events to the
	// node's history, in the same transaction, when (and only when) the
	// update is stored. Each event must carry its UUID and CreatedAt; one
	// naming no State records the node's provision state, target and time
	// since its last provision change as stored before the update, as
	// AddHistory called just before would have. The events' documents are
	// made after fn runs: fn may complete them (through the caller's
	// slice), e.g. to record the node as it leaves fn.
	UpdateNodeWithHistory(ctx context.Context, ident string, fn func(n *proto.Node) error, events []proto.HistoryEvent) (*proto.Node, error)
}

var _ NodeHistoryWriter = (*sqlStore)(nil)
