package store

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps queries prepared (the readers' and the writer's hot ones). modernc's SQLite compiles a
// statement on every unprepared query, which costs more than running it
// for the single-row reads of the API's hot routes (a node get, an agent
// lookup) — a fifth of a heartbeat's CPU, measured. The cache is bounded:
// list queries vary with their filters, and a query met once the cache is
// full runs unprepared as before.
type stmtCache struct {
	db    *sql.DB
	mu    sync.RWMutex
	stmts map[string]*sql.Stmt
}

// maxCachedStmts bounds the statements kept (per read connection, SQLite
// holds one compiled copy of each).
const maxCachedStmts = 256

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}}
}

// get returns query prepared on the cache's database, or nil when the
// cache is full or preparing fails (the caller then runs it unprepared,
// and reports any error then).
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.RLock()
	st, ok := c.stmts[query]
	full := len(c.stmts) >= maxCachedStmts
	c.mu.RUnlock()
	if ok {
		return st
	}
	if full {
		return nil
	}
	// Prepared without the lock held: preparing on the writer waits for
	// its one connection, which a transaction may hold while it looks up
	// a statement (cached).
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.stmts[query]; ok {
		st.Close()
		return old
	}
	if len(c.stmts) >= maxCachedStmts {
		st.Close()
		return nil
	}
	c.stmts[query] = st
	return st
}

// cached is query's statement if the cache holds it, nil otherwise; it
// never prepares, so it may be called while a transaction holds the
// writer's one connection.
func (c *stmtCache) cached(query string) *sql.Stmt {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.stmts[query]
}

// close closes every cached statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}
