package store

import (
	"context"
	"fmt"
)

// bumpRowVersion is the SET term that every UPDATE of nodes changing what
// the API renders of a node (doc, masked_doc, reservation,
// provision_state) carries, in the same statement: the row's version
// (migration 0034) then tells a reader holding the node's rendering
// whether it is still right without reading the document back. It is
// bumped in SQL, not by a trigger (a trigger costs every write) nor in Go
// (several controllers share a PostgreSQL database). The store's tests
// refuse, on SQLite, any UPDATE that changes those columns without it.
const bumpRowVersion = "row_version = row_version + 1"

// NodeVersion names the content of a node row: its id, never reused, and
// its version: the row version, bumped by every write that changes what
// the API shows, plus the narrow heartbeat stamp (agentseen.go, in
// microseconds; 0 for none), which reads merge into what the API shows
// without a bump. Neither ever decreases, so their sum changes whenever
// either does, and one column read tells both.
type NodeVersion struct {
	ID, RowVersion int64
}

// contentVersion is NodeVersion.RowVersion as SQL over nodesSeen.
const contentVersion = "row_version + COALESCE(node_agent_seen.last_heartbeat, 0)"

// VersionedNodeViews reads nodes' versions cheaply and their views only
// where needed: a reader that keeps renderings keyed by NodeVersion lists
// a page's versions (from an index, without the documents) and reads the
// views of those it does not hold.
type VersionedNodeViews interface {
	// ListNodeVersions is ListNodes' page as versions, in list order.
	ListNodeVersions(ctx context.Context, q NodeQuery) ([]NodeVersion, error)
	// NodeViewsByID reads the views of the nodes with these ids, with
	// their ids and row versions, in no particular order; nodes deleted
	// since are left out.
	NodeViewsByID(ctx context.Context, ids []int64) ([]VersionedView, error)
}

// VersionedView is a node's view and the version of the row it was read
// from.
type VersionedView struct {
	NodeVersion
	NodeView
}

// VersionedViewsOf is st's VersionedNodeViews, through wrappers
// (Unwrapper); false if it has none.
func VersionedViewsOf(st Store) (VersionedNodeViews, bool) {
	for {
		if v, ok := st.(VersionedNodeViews); ok {
			return v, true
		}
		w, ok := st.(Unwrapper)
		if !ok {
			return nil, false
		}
		st = w.Unwrap()
	}
}

func (s *sqlStore) ListNodeVersions(ctx context.Context, q NodeQuery) ([]NodeVersion, error) {
	where, args := nodeWhere(q)
	rows, err := s.list(ctx, nodesSeen, "id, "+contentVersion, nodeSortExprs, where, args, q.SortKey, q.SortDir, q.Marker, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	out := make([]NodeVersion, 0, min(max(q.Limit, 1), 1000))
	for rows.Next() {
		var v NodeVersion
		if err := rows.Scan(&v.ID, &v.RowVersion); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// viewsByIDBatch is the most ids NodeViewsByID asks for in one query.
const viewsByIDBatch = 256

// idsPlaceholders is the IN list for n ids rounded up to a power of four
// (the ids repeated to fill it), so that a handful of statements serve
// every count and stay prepared.
func idsPlaceholders(n int) int {
	k := 1
	for k < n {
		k *= 4
	}
	return min(k, viewsByIDBatch)
}

func (s *sqlStore) NodeViewsByID(ctx context.Context, ids []int64) ([]VersionedView, error) {
	out := make([]VersionedView, 0, len(ids))
	for len(ids) > 0 {
		batch := ids[:min(len(ids), viewsByIDBatch)]
		ids = ids[len(batch):]
		k := idsPlaceholders(len(batch))
		args := make([]any, k)
		for i := range args {
			args[i] = batch[min(i, len(batch)-1)]
		}
		query := "SELECT id, " + contentVersion + ", " + viewCols + " FROM " + nodesSeen + " WHERE id IN (" + placeholders(k) + ")"
		if err := s.readViews(ctx, query, args, &out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readViews appends the VersionedViews query answers to out.
func (s *sqlStore) readViews(ctx context.Context, query string, args []any, out *[]VersionedView) error {
	rows, err := s.query(ctx, s.rdb, query, args...)
	if err != nil {
		return fmt.Errorf("read nodes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v VersionedView
		scan := func(dest ...any) error {
			return rows.Scan(append([]any{&v.ID, &v.RowVersion}, dest...)...)
		}
		if err := scanView(scan, &v.NodeView); err != nil {
			return fmt.Errorf("read nodes: %w", err)
		}
		*out = append(*out, v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read nodes: %w", err)
	}
	return nil
}
