package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// agentViewCacheSize bounds agentViews: a fleet of this many agents
// heartbeating through one controller is served from it; beyond, entries
// are dropped at random and read again.
const agentViewCacheSize = 1 << 16

// agentViews keeps the AgentView last read in full for each node UUID,
// with the row version it was read at, so that a heartbeat on a node that
// has not changed since reads three integers from an index (the row's id
// and version and its narrow stamp) instead of the node's document. A
// committed stamp invalidates every SQLite reader's page cache, so each
// written heartbeat paid for the document's pages, its copy and its scan:
// a third of a written heartbeat's CPU. Every use is checked against the
// row version in the database, bumped by every write of the row
// (noderowversion.go), so a view is never older than the database and
// several controllers still decide on what it holds.
type agentViews struct {
	mu    sync.Mutex
	m     map[string]AgentView // by UUID; doc and masked left empty
	limit int                  // entries kept at most; 0: agentViewCacheSize
}

// get is the view kept for uuid if it was read from row id at rowVersion.
func (c *agentViews) get(uuid string, id, rowVersion int64) (AgentView, bool) {
	c.mu.Lock()
	v, ok := c.m[uuid]
	c.mu.Unlock()
	if !ok || v.id != id || v.rowVersion != rowVersion {
		return AgentView{}, false
	}
	return v, true
}

// has reports whether a view is kept for uuid, whatever its version.
func (c *agentViews) has(uuid string) bool {
	c.mu.Lock()
	_, ok := c.m[uuid]
	c.mu.Unlock()
	return ok
}

// put keeps v, read in full, without its documents (the one write that
// needs them reads them again: agentDocs).
func (c *agentViews) put(v AgentView) {
	v.doc, v.masked = "", nil
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]AgentView)
	}
	limit := c.limit
	if limit <= 0 {
		limit = agentViewCacheSize
	}
	if _, ok := c.m[v.UUID]; !ok && len(c.m) >= limit {
		for k := range c.m { // a random entry: map order is
			delete(c.m, k)
			break
		}
	}
	c.m[v.UUID] = v
}

// drop forgets the view kept for uuid: after this controller's own write
// of the row, which bumped its version, a probe would only find it stale.
func (c *agentViews) drop(uuid string) {
	c.mu.Lock()
	delete(c.m, uuid)
	c.mu.Unlock()
}

// agentProbeQuery reads what tells whether a kept view still holds: the
// row's id and version, from the covering index nodes_uuid_version
// (migration 0038) without the row, and the narrow stamp. SQLite's planner
// prefers the unique index on uuid, then reads the row; it is told.
func (d *dialect) agentProbeQuery() string {
	from := "nodes"
	if !d.numbered {
		from = "nodes INDEXED BY nodes_uuid_version"
	}
	return "SELECT id, row_version, " + seenCol + " FROM " + from + " WHERE uuid = ?"
}

// keptAgentOf is the kept view of the node with this UUID when its row has
// not changed since, with the current narrow stamp applied; false when
// none is kept, the row changed or there is no such UUID (ident may be a
// name): the caller then reads the view in full.
func (s *sqlStore) keptAgentOf(ctx context.Context, uuid string) (AgentView, bool, error) {
	if !s.agents.has(uuid) {
		return AgentView{}, false, nil
	}
	var (
		id, rowVersion int64
		seen           sql.NullInt64
	)
	err := s.queryRow(ctx, s.rdb, s.d.agentProbeQuery(), uuid).Scan(&id, &rowVersion, &seen)
	if errors.Is(err, sql.ErrNoRows) {
		return AgentView{}, false, nil
	}
	if err != nil {
		return AgentView{}, false, fmt.Errorf("read agent of node %s: %w", uuid, err)
	}
	v, ok := s.agents.get(uuid, id, rowVersion)
	if !ok {
		return AgentView{}, false, nil
	}
	v.LastHeartbeat = v.docHeartbeat
	applySeen(&v, seen)
	return v, true, nil
}

// agentDocs reads the document and masked copy of the row v was read
// from, for a view served without them; ok is false when the row has
// changed since (RecordAgent's condition would not hold either).
func (s *sqlStore) agentDocs(ctx context.Context, v *AgentView) (bool, error) {
	var masked sql.NullString
	err := s.queryRow(ctx, s.rdb, "SELECT doc, masked_doc FROM nodes WHERE id = ? AND row_version = ?", v.id, v.rowVersion).
		Scan(&v.doc, &masked)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record agent of node %s: %w", v.UUID, err)
	}
	v.masked = nil
	if masked.Valid {
		v.masked = &masked.String
	}
	return true, nil
}
