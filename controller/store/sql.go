package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/proto"
)

// sqlStore is the Store over database/sql, shared by SQLite and PostgreSQL;
// d carries what differs.
type sqlStore struct {
	d *dialect
	// rdb serves reads outside transactions; wdb runs every write. For SQLite
	// wdb is a single connection (one writer path, no SQLITE_BUSY between our
	// own writers) and rdb a small pool of read-only connections (WAL lets
	// them read while the writer writes). For PostgreSQL both are one pool.
	rdb, wdb *sql.DB
	// stmts keeps rdb's queries prepared (SQLite); nil: none kept.
	stmts *stmtCache
	// wstmts keeps hot writes prepared on wdb (SQLite); nil: none kept.
	wstmts *stmtCache
	// gate queues writes for wdb's one connection (SQLite,
	// writegate.go); nil: the pool is left to share out its connections.
	gate      *writeGate
	deadAfter time.Duration
	clock     func() time.Time
	// writes counts committed writes (writecount.go).
	writes writeCounter
	// beforeNodeWrite, when set (tests), runs in UpdateNode's optimistic
	// path between the read and the conditional write.
	beforeNodeWrite func(uuid string)
	// onNodeRead, when set (tests), runs when UpdateNode reads a node
	// (heldnode.go's commits do not).
	onNodeRead func(ident string)
	// wal checkpoints SQLite's log off the commit path (sqlitewal.go); nil
	// for PostgreSQL.
	wal *walCheckpointer
	// seen commits narrow heartbeat stamps in groups (seenbatch.go).
	seen seenBatcher
	// agents keeps agent views for heartbeats on unchanged nodes
	// (agentcache.go).
	agents agentViews
}

var _ Store = (*sqlStore)(nil)

func (s *sqlStore) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

// aliveCutoff is the oldest heartbeat (µs) of a conductor still alive.
func (s *sqlStore) aliveCutoff() int64 { return s.now().Add(-s.deadAfter).UnixMicro() }

// aliveConductors is a subquery of the hostnames of alive conductors; it takes
// aliveCutoff as its one argument.
const aliveConductors = "(SELECT hostname FROM conductors WHERE online AND updated_at >= ?)"

func (s *sqlStore) Close() error {
	if s.stmts != nil {
		s.stmts.close()
	}
	if s.wstmts != nil {
		s.wstmts.close()
	}
	var err error
	if s.wal != nil {
		err = s.wal.close()
	}
	err = errors.Join(err, s.wdb.Close())
	if s.rdb != s.wdb {
		err = errors.Join(err, s.rdb.Close())
	}
	return err
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *sqlStore) exec(ctx context.Context, q querier, query string, args ...any) (sql.Result, error) {
	return q.ExecContext(ctx, s.d.rebind(query), args...)
}

func (s *sqlStore) query(ctx context.Context, q querier, query string, args ...any) (*sql.Rows, error) {
	if st := s.prepared(ctx, q, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.QueryContext(ctx, s.d.rebind(query), args...)
}

func (s *sqlStore) queryRow(ctx context.Context, q querier, query string, args ...any) *sql.Row {
	if st := s.prepared(ctx, q, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.QueryRowContext(ctx, s.d.rebind(query), args...)
}

// prepared is query's cached statement when q is the read pool and the
// store keeps statements; nil otherwise.
func (s *sqlStore) prepared(ctx context.Context, q querier, query string) *sql.Stmt {
	if s.stmts == nil {
		return nil
	}
	if db, ok := q.(*sql.DB); !ok || db != s.rdb {
		return nil
	}
	return s.stmts.get(ctx, s.d.rebind(query))
}

// preparedWrite is query prepared on the writer, for txExec; nil when the
// store keeps no write statements. It must be called outside a
// transaction: SQLite's writer pool has one connection, which a
// transaction holds.
func (s *sqlStore) preparedWrite(ctx context.Context, query string) *sql.Stmt {
	if s.wstmts == nil {
		return nil
	}
	return s.wstmts.get(ctx, s.d.rebind(query))
}

// txExec runs query in tx through st, its preparedWrite statement, when
// there is one: the writer's connection compiled it once, where an
// unprepared UPDATE is parsed and planned on every call (a fifth of a
// heartbeat's CPU, measured).
func (s *sqlStore) txExec(ctx context.Context, tx *sql.Tx, st *sql.Stmt, query string, args ...any) (sql.Result, error) {
	if st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return s.exec(ctx, tx, query, args...)
}

// txQueryRow is txExec for a single-row query.
func (s *sqlStore) txQueryRow(ctx context.Context, tx *sql.Tx, st *sql.Stmt, query string, args ...any) *sql.Row {
	if st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return s.queryRow(ctx, tx, query, args...)
}

// maxAttempts bounds the retries of a transaction the database refused
// because of contention (SQLITE_BUSY past busy_timeout, PostgreSQL
// serialization failures and deadlocks).
const maxAttempts = 8

// writeTx runs fn in a write transaction and commits it; an error from fn
// rolls back and is returned as is. The whole transaction is retried when
// the database reports contention.
func (s *sqlStore) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	backoff := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.tryTx(ctx, fn)
		if err == nil || attempt == maxAttempts || !s.d.retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (after %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func (s *sqlStore) tryTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := s.enterWriter(ctx); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer s.leaveWriter()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.writes.all.Add(1)
	if s.wal != nil {
		s.wal.committed()
	}
	return nil
}

// enterWriter waits for the store's turn to write (writegate.go);
// leaveWriter ends it.
func (s *sqlStore) enterWriter(ctx context.Context) error {
	if s.gate == nil {
		return nil
	}
	return s.gate.acquire(ctx)
}

func (s *sqlStore) leaveWriter() {
	if s.gate != nil {
		s.gate.release()
	}
}

// mapWriteError turns constraint violations into the Store's errors.
func (s *sqlStore) mapWriteError(err error, what string) error {
	if err == nil {
		return nil
	}
	switch c := s.d.uniqueViolation(err); {
	case c == "nodes_name_key":
		return fmt.Errorf("%s: %w", what, ErrDuplicateName)
	case c == "ports_address_key":
		return fmt.Errorf("%s: %w", what, ErrDuplicateMAC)
	case c == "ports_name_key":
		return fmt.Errorf("%s: %w", what, ErrDuplicatePortName)
	case strings.HasSuffix(c, "_uuid_key"):
		return fmt.Errorf("%s: %w", what, ErrDuplicateUUID)
	}
	if s.d.foreignKeyViolation(err) {
		return fmt.Errorf("%s: %w (%v)", what, ErrMissingReference, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// ---- nodes ----

// nodeByIdent selects a node by UUID or, failing that, by name.
func (s *sqlStore) nodeByIdent(lock bool) string {
	q := "SELECT id, doc, reservation FROM nodes WHERE uuid = ? OR name = ? " +
		"ORDER BY CASE WHEN uuid = ? THEN 0 ELSE 1 END LIMIT 1"
	if lock {
		q += s.d.forUpdate
	}
	return q
}

func (s *sqlStore) getNode(ctx context.Context, q querier, ident string, lock bool) (int64, *proto.Node, error) {
	return s.scanNode(ident, s.queryRow(ctx, q, s.nodeByIdent(lock), ident, ident, ident))
}

// getNodeTx is getNode locking the row in a write transaction, through
// st, nodeByIdent(true) prepared on the writer (nil: unprepared).
func (s *sqlStore) getNodeTx(ctx context.Context, tx *sql.Tx, st *sql.Stmt, ident string) (int64, *proto.Node, error) {
	return s.scanNode(ident, s.txQueryRow(ctx, tx, st, s.nodeByIdent(true), ident, ident, ident))
}

func (s *sqlStore) scanNode(ident string, row *sql.Row) (int64, *proto.Node, error) {
	var (
		id  int64
		doc []byte
		res sql.NullString
	)
	err := row.Scan(&id, &doc, &res)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, fmt.Errorf("node %s: %w", ident, ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("get node %s: %w", ident, err)
	}
	var reservation *string
	if res.Valid {
		reservation = &res.String
	}
	n, err := decodeNode(doc, reservation)
	if err != nil {
		return 0, nil, fmt.Errorf("get node %s: %w", ident, err)
	}
	return id, n, nil
}

func (s *sqlStore) CreateNode(ctx context.Context, n *proto.Node) error {
	if n.UUID == "" {
		return errors.New("create node: the UUID is not set")
	}
	prev := n.CreatedAt
	n.CreatedAt = wireTime(s.clock())
	vals, err := nodeValues(n)
	if err != nil {
		n.CreatedAt = prev
		return err
	}
	query := "INSERT INTO nodes (" + strings.Join(nodeColumns, ", ") + ") VALUES (" + placeholders(len(nodeColumns)) + ")"
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, query, vals...)
		return err
	})
	if err != nil {
		n.CreatedAt = prev
		return s.mapWriteError(err, "create node "+n.UUID)
	}
	return nil
}

func (s *sqlStore) GetNode(ctx context.Context, ident string) (*proto.Node, error) {
	id, n, err := s.getNode(ctx, s.rdb, ident, false)
	if err == nil {
		err = s.mergeSeen(ctx, s.rdb, id, n)
	}
	return n, err
}

// updateNodeLocked is UpdateNode inside one write transaction holding the
// node's row (and, on SQLite, the single writer) throughout: the fallback
// of the optimistic path (nodeupdate.go) when it keeps losing races.
func (s *sqlStore) updateNodeLocked(ctx context.Context, ident string, fn func(n *proto.Node) error, events []proto.HistoryEvent) (*proto.Node, error) {
	var out *proto.Node
	var mapped bool
	// The statements are prepared on the writer: compiling an UPDATE on
	// each call was a fifth of the conductor's CPU in a fleet's provide
	// phase. Which UPDATE (nodewrite.go) is known inside the transaction
	// only, when the writer's one connection is taken: a column set met
	// for the first time runs unprepared and is prepared after.
	selectQuery := s.nodeSelectForUpdate()
	get := s.preparedWrite(ctx, selectQuery)
	seen := s.preparedWrite(ctx, seenQuery)
	var updateQuery string
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		id, stored, n, err := s.getNodeForUpdate(ctx, tx, get, selectQuery, ident)
		if err == nil {
			err = s.mergeSeenTx(ctx, tx, seen, id, n)
		}
		if err != nil {
			mapped = true
			return err
		}
		uuid := n.UUID
		was := stateOf(n)
		if err := fn(n); err != nil {
			mapped = true
			return err
		}
		docs, err := historyDocs(uuid, was, events)
		if err != nil {
			mapped = true
			return err
		}
		if n.UUID != uuid {
			mapped = true
			return fmt.Errorf("update node %s: the UUID cannot change (to %q)", uuid, n.UUID)
		}
		n.UpdatedAt = wireTime(s.clock())
		vals, err := nodeValues(n)
		if err != nil {
			mapped = true
			return err
		}
		m := changedColumns(stored, vals)
		updateQuery = updateNodeColumns(m)
		var st *sql.Stmt
		if s.wstmts != nil {
			st = s.wstmts.cached(s.d.rebind(updateQuery))
		}
		if _, err := s.txExec(ctx, tx, st, updateQuery, maskedArgs(m, vals, id)...); err != nil {
			return err
		}
		if err := s.insertHistory(ctx, tx, nil, uuid, events, docs); err != nil {
			return err
		}
		out = n
		return nil
	})
	if err != nil {
		if mapped {
			return nil, err
		}
		return nil, s.mapWriteError(err, "update node "+ident)
	}
	s.wrote(writeUpdateNode)
	s.preparedWrite(ctx, updateQuery)
	return out, nil
}

// getNodeForUpdate reads and locks a node for UpdateNode through st
// (nodeSelectForUpdate prepared; nil: unprepared): its id, its stored
// columns (nodeColumns' order, as the driver scans them) and the node.
func (s *sqlStore) getNodeForUpdate(ctx context.Context, tx *sql.Tx, st *sql.Stmt, query, ident string) (int64, []any, *proto.Node, error) {
	var id int64
	stored := make([]any, len(nodeColumns))
	dest := make([]any, len(nodeColumns)+1)
	dest[0] = &id
	for i := range stored {
		dest[i+1] = &stored[i]
	}
	err := s.txQueryRow(ctx, tx, st, query, ident, ident, ident).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, nil, fmt.Errorf("node %s: %w", ident, ErrNotFound)
	}
	if err != nil {
		return 0, nil, nil, fmt.Errorf("get node %s: %w", ident, err)
	}
	n, err := storedNode(ident, stored)
	if err != nil {
		return 0, nil, nil, err
	}
	return id, stored, n, nil
}

// storedNode decodes the node from its stored columns (nodeColumns' order,
// as the driver scans them).
func storedNode(ident string, stored []any) (*proto.Node, error) {
	var doc []byte
	switch d := stored[nodeColumnIndex["doc"]].(type) {
	case string:
		doc = []byte(d)
	case []byte:
		doc = d
	default:
		return nil, fmt.Errorf("get node %s: the document is %T", ident, d)
	}
	var reservation *string
	switch r := stored[nodeColumnIndex["reservation"]].(type) {
	case string:
		reservation = &r
	case []byte:
		s := string(r)
		reservation = &s
	}
	n, err := decodeNode(doc, reservation)
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", ident, err)
	}
	return n, nil
}

func (s *sqlStore) DeleteNode(ctx context.Context, uuid string) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := s.exec(ctx, tx, "DELETE FROM nodes WHERE uuid = ?", uuid)
		return affectedOne(r, err, "delete node "+uuid, "node "+uuid)
	})
}

// affectedOne turns "no row changed" into ErrNotFound naming what.
func affectedOne(r sql.Result, err error, doing, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

// nodeWhere is the WHERE clause of a NodeQuery's filters.
func nodeWhere(q NodeQuery) (where []string, args []any) {
	for _, f := range []struct{ col, val string }{
		{"provision_state", q.ProvisionState}, {"driver", q.Driver}, {"conductor_group", q.ConductorGroup},
		{"resource_class", q.ResourceClass}, {"instance_uuid", q.InstanceUUID}, {"owner", q.Owner}, {"fault", q.Fault},
		{"chassis_uuid", q.ChassisUUID}, {"instance_name", q.InstanceName},
	} {
		if f.val != "" {
			where = append(where, f.col+" = ?")
			args = append(args, f.val)
		}
	}
	if q.Maintenance != nil {
		where = append(where, "maintenance = ?")
		args = append(args, *q.Maintenance)
	}
	if q.Associated != nil {
		if *q.Associated {
			where = append(where, "instance_uuid <> ''")
		} else {
			where = append(where, "instance_uuid = ''")
		}
	}
	where, args = nodeFilterWhere(q, where, args)
	return shardWhere(q, where, args)
}

func (s *sqlStore) ListNodes(ctx context.Context, q NodeQuery) ([]*proto.Node, error) {
	where, args := nodeWhere(q)
	if q.Summary {
		return s.listNodeSummaries(ctx, where, args, q)
	}
	rows, err := s.list(ctx, nodesSeen, "doc, reservation, "+seenJoined, nodeSortExprs, where, args, q.SortKey, q.SortDir, q.Marker, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []*proto.Node
	for rows.Next() {
		var doc []byte
		var res sql.NullString
		var seen sql.NullInt64
		if err := rows.Scan(&doc, &res, &seen); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		var reservation *string
		if res.Valid {
			reservation = &res.String
		}
		n, err := decodeNode(doc, reservation)
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		mergeSeenNode(n, seen)
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// list runs a filtered, sorted, keyset-paged SELECT of cols from table. Rows
// are ordered by the sort expression, then id, so the order is total and a
// marker row names a precise place in it.
func (s *sqlStore) list(ctx context.Context, table, cols string, exprs map[string]string,
	where []string, args []any, sortKey, sortDir, marker string, limit int) (*sql.Rows, error) {
	query, args, err := s.listQuery(ctx, table, cols, exprs, where, args, sortKey, sortDir, marker, limit)
	if err != nil {
		return nil, err
	}
	return s.query(ctx, s.rdb, query, args...)
}

// listQuery builds list's SELECT. The page after a marker is the rows after
// (marker's expr, marker's id) in (expr, id) order, written so that both
// SQLite and PostgreSQL answer it with one seek into the index on (expr,
// id): paging to the end of any fleet costs O(page) per page.
func (s *sqlStore) listQuery(ctx context.Context, table, cols string, exprs map[string]string,
	where []string, args []any, sortKey, sortDir, marker string, limit int) (string, []any, error) {
	expr, desc, err := orderBy(exprs, sortKey, sortDir)
	if err != nil {
		return "", nil, err
	}
	if limit < 0 {
		return "", nil, fmt.Errorf("%w: negative limit %d", ErrBadQuery, limit)
	}
	cmp, dir := ">", "ASC"
	if desc {
		cmp, dir = "<", "DESC"
	}
	if marker != "" {
		var markerID int64
		var markerVal any
		err := s.queryRow(ctx, s.rdb, "SELECT id, "+expr+" FROM "+table+" WHERE uuid = ?", marker).Scan(&markerID, &markerVal)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil, fmt.Errorf("marker %s: %w", marker, ErrNotFound)
		}
		if err != nil {
			return "", nil, fmt.Errorf("find marker %s: %w", marker, err)
		}
		if expr == "id" {
			where = append(where, "id "+cmp+" ?")
			args = append(args, markerID)
		} else {
			// The first term is a range on the sort expression that any
			// index on (expr, id), expression indexes included, seeks to.
			where = append(where, "("+expr+" "+cmp+"= ? AND ("+expr+" "+cmp+" ? OR id "+cmp+" ?))")
			args = append(args, markerVal, markerVal, markerID)
		}
	}
	query := "SELECT " + cols + " FROM " + table
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY " + expr + " " + dir
	if expr != "id" {
		query += ", id " + dir
	}
	if limit > 0 {
		query += " LIMIT ?"
		args = append(args, limit)
	}
	return query, args, nil
}

// ---- reservations ----

// reserveRow reserves row id (the node ident) for conductor in tx through
// reserve (reserveQuery prepared on the writer); holder is who held it as
// read, for the LockedError when the row is not free.
func (s *sqlStore) reserveRow(ctx context.Context, tx *sql.Tx, reserve *sql.Stmt, ident, conductor string, id int64, holder string) error {
	r, err := s.txExec(ctx, tx, reserve, reserveQuery, conductor, id, s.aliveCutoff())
	if err != nil {
		return fmt.Errorf("reserve node %s: %w", ident, err)
	}
	if k, err := r.RowsAffected(); err != nil {
		return fmt.Errorf("reserve node %s: %w", ident, err)
	} else if k == 0 {
		return &LockedError{Node: ident, Holder: holder}
	}
	return nil
}

func (s *sqlStore) Reserve(ctx context.Context, ident, conductor string) (*proto.Node, error) {
	if conductor == "" {
		return nil, errors.New("reserve node: no conductor named")
	}
	// The document is decoded after the commit: the single writer is
	// held for the two statements only.
	var (
		doc []byte
		id  int64
	)
	get, reserve := s.preparedWrite(ctx, s.nodeByIdent(true)), s.preparedWrite(ctx, reserveQuery)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var res sql.NullString
		err := s.txQueryRow(ctx, tx, get, s.nodeByIdent(true), ident, ident, ident).Scan(&id, &doc, &res)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %s: %w", ident, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("get node %s: %w", ident, err)
		}
		holder := "?"
		if res.Valid {
			holder = res.String
		}
		return s.reserveRow(ctx, tx, reserve, ident, conductor, id, holder)
	})
	if err != nil {
		return nil, err
	}
	s.wrote(writeReserve)
	n, err := decodeNode(doc, &conductor)
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", ident, err)
	}
	if err := s.mergeSeen(ctx, s.rdb, id, n); err != nil {
		return nil, err
	}
	return n, nil
}

// reserveQuery and releaseQuery take and give back a node's reservation.
const (
	reserveQuery = "UPDATE nodes SET reservation = ?, " + bumpRowVersion + " WHERE id = ? AND " +
		"(reservation IS NULL OR reservation NOT IN " + aliveConductors + ")"
	releaseQuery = "UPDATE nodes SET reservation = NULL, " + bumpRowVersion + " WHERE uuid = ? AND reservation = ?"
)

func (s *sqlStore) Release(ctx context.Context, uuid, conductor string) error {
	release := s.preparedWrite(ctx, releaseQuery)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := s.txExec(ctx, tx, release, releaseQuery, uuid, conductor)
		if err != nil {
			return fmt.Errorf("release node %s: %w", uuid, err)
		}
		if k, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("release node %s: %w", uuid, err)
		} else if k == 1 {
			return nil
		}
		var res sql.NullString
		err = s.queryRow(ctx, tx, "SELECT reservation FROM nodes WHERE uuid = ?", uuid).Scan(&res)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("node %s: %w", uuid, ErrNotFound)
		case err != nil:
			return fmt.Errorf("release node %s: %w", uuid, err)
		case res.Valid:
			return &LockedError{Node: uuid, Holder: res.String}
		default:
			return fmt.Errorf("release node %s by %s: %w", uuid, conductor, ErrNotReserved)
		}
	})
	if err == nil {
		s.wrote(writeRelease)
	}
	return err
}

func (s *sqlStore) ReleaseDead(ctx context.Context) ([]string, error) {
	var released []string
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		released = released[:0]
		rows, err := s.query(ctx, tx, "UPDATE nodes SET reservation = NULL, "+bumpRowVersion+" WHERE reservation IS NOT NULL AND "+
			"reservation NOT IN "+aliveConductors+" RETURNING uuid", s.aliveCutoff())
		if err != nil {
			return fmt.Errorf("release reservations of dead conductors: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var u string
			if err := rows.Scan(&u); err != nil {
				return fmt.Errorf("release reservations of dead conductors: %w", err)
			}
			released = append(released, u)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return released, nil
}

// ---- ports ----

func (s *sqlStore) CreatePort(ctx context.Context, p *proto.Port) error {
	if p.UUID == "" {
		return errors.New("create port: the UUID is not set")
	}
	prev := p.CreatedAt
	p.CreatedAt = wireTime(s.clock())
	vals, err := portValues(p)
	if err != nil {
		p.CreatedAt = prev
		return err
	}
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		nodeID, err := s.nodeID(ctx, tx, p.NodeUUID)
		if err != nil {
			return err
		}
		_, err = s.exec(ctx, tx, "INSERT INTO ports (node_id, "+strings.Join(portColumns, ", ")+") VALUES (?, "+
			placeholders(len(portColumns))+")", append([]any{nodeID}, vals...)...)
		return s.mapPortError(err, "create port "+p.UUID, p.NodeUUID, p.PortgroupUUID)
	})
	if err != nil {
		p.CreatedAt = prev
	}
	return err
}

func (s *sqlStore) mapPortError(err error, doing, node string, portgroup *string) error {
	if err != nil && s.d.foreignKeyViolation(err) && portgroup != nil && *portgroup != "" {
		// The node was found in this transaction: the port group is missing.
		return fmt.Errorf("%s: port group %s: %w", doing, *portgroup, ErrMissingReference)
	}
	if err != nil && s.d.foreignKeyViolation(err) {
		return fmt.Errorf("%s: node %s: %w", doing, node, ErrNotFound)
	}
	if err != nil {
		return s.mapWriteError(err, doing)
	}
	return nil
}

// nodeID finds a node's row id by UUID.
func (s *sqlStore) nodeID(ctx context.Context, q querier, nodeUUID string) (int64, error) {
	var id int64
	err := s.queryRow(ctx, q, "SELECT id FROM nodes WHERE uuid = ?", nodeUUID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("node %s: %w", nodeUUID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("find node %s: %w", nodeUUID, err)
	}
	return id, nil
}

func (s *sqlStore) getPort(ctx context.Context, q querier, col, val string, lock bool) (int64, *proto.Port, error) {
	query := "SELECT id, doc FROM ports WHERE " + col + " = ?"
	if lock {
		query += s.d.forUpdate
	}
	var id int64
	var doc []byte
	err := s.queryRow(ctx, q, query, val).Scan(&id, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, fmt.Errorf("port %s: %w", val, ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("get port %s: %w", val, err)
	}
	p, err := decodePort(doc)
	if err != nil {
		return 0, nil, fmt.Errorf("get port %s: %w", val, err)
	}
	return id, p, nil
}

func (s *sqlStore) GetPort(ctx context.Context, uuid string) (*proto.Port, error) {
	_, p, err := s.getPort(ctx, s.rdb, "uuid", uuid, false)
	return p, err
}

func (s *sqlStore) GetPortByAddress(ctx context.Context, mac string) (*proto.Port, error) {
	_, p, err := s.getPort(ctx, s.rdb, "address", strings.ToLower(mac), false)
	return p, err
}

func (s *sqlStore) ListPorts(ctx context.Context, q PortQuery) ([]*proto.Port, error) {
	var where []string
	var args []any
	if q.NodeUUID != "" {
		// A scalar subquery (NULL, so no rows, for an unknown node): an IN
		// list would make SQLite sort the node's ports instead of reading
		// them in index order.
		where = append(where, "node_id = (SELECT id FROM nodes WHERE uuid = ?)")
		args = append(args, q.NodeUUID)
	}
	if q.Address != "" {
		where = append(where, "address = ?")
		args = append(args, strings.ToLower(q.Address))
	}
	if q.Name != "" {
		where = append(where, "name = ?")
		args = append(args, q.Name)
	}
	if q.PortgroupUUID != "" {
		where = append(where, "portgroup_uuid = ?")
		args = append(args, q.PortgroupUUID)
	}
	where, args = portPlacementWhere(q, where, args)
	cols := "doc"
	if q.Summary {
		cols = "uuid, address"
	}
	rows, err := s.list(ctx, "ports", cols, portSortExprs, where, args, q.SortKey, q.SortDir, q.Marker, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list ports: %w", err)
	}
	defer rows.Close()
	var out []*proto.Port
	for rows.Next() {
		if q.Summary {
			p := new(proto.Port)
			if err := rows.Scan(&p.UUID, &p.Address); err != nil {
				return nil, fmt.Errorf("list ports: %w", err)
			}
			out = append(out, p)
			continue
		}
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("list ports: %w", err)
		}
		if q.docs != nil {
			*q.docs = append(*q.docs, doc)
			continue
		}
		p, err := decodePort(doc)
		if err != nil {
			return nil, fmt.Errorf("list ports: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list ports: %w", err)
	}
	return out, nil
}

func (s *sqlStore) UpdatePort(ctx context.Context, uuid string, fn func(p *proto.Port) error) (*proto.Port, error) {
	var out *proto.Port
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		id, p, err := s.getPort(ctx, tx, "uuid", uuid, true)
		if err != nil {
			return err
		}
		if err := fn(p); err != nil {
			return err
		}
		if p.UUID != uuid {
			return fmt.Errorf("update port %s: the UUID cannot change (to %q)", uuid, p.UUID)
		}
		p.UpdatedAt = wireTime(s.clock())
		nodeID, err := s.nodeID(ctx, tx, p.NodeUUID)
		if err != nil {
			return fmt.Errorf("update port %s: %w", uuid, err)
		}
		vals, err := portValues(p)
		if err != nil {
			return err
		}
		set := []string{"node_id = ?"}
		for _, c := range portColumns {
			set = append(set, c+" = ?")
		}
		args := append(append([]any{nodeID}, vals...), id)
		_, err = s.exec(ctx, tx, "UPDATE ports SET "+strings.Join(set, ", ")+" WHERE id = ?", args...)
		if err := s.mapPortError(err, "update port "+uuid, p.NodeUUID, p.PortgroupUUID); err != nil {
			return err
		}
		out = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *sqlStore) DeletePort(ctx context.Context, uuid string) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := s.exec(ctx, tx, "DELETE FROM ports WHERE uuid = ?", uuid)
		return affectedOne(r, err, "delete port "+uuid, "port "+uuid)
	})
}

// ---- history and inventory ----

func (s *sqlStore) AddHistory(ctx context.Context, nodeUUID string, ev proto.HistoryEvent) error {
	if ev.UUID == "" {
		ev.UUID = uuid.NewString()
	}
	if ev.CreatedAt == nil {
		ev.CreatedAt = wireTime(s.clock())
	}
	ev.Links = nil
	// Prepared on the writer: each provision request and flow step adds
	// an event, and compiling the two statements was a third of it.
	get, insert := s.preparedWrite(ctx, historyNodeQuery), s.preparedWrite(ctx, historyInsertQuery)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		doc, err := s.historyDoc(ctx, tx, get, nodeUUID, ev)
		if err != nil {
			return err
		}
		r, err := s.txExec(ctx, tx, insert, historyInsertQuery, ev.UUID, micros(ev.CreatedAt), string(doc), nodeUUID)
		return affectedOne(r, err, "add history event to node "+nodeUUID, "node "+nodeUUID)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return s.mapWriteError(err, "add history event")
	}
	if err == nil {
		s.wrote(writeHistory)
	}
	return err
}

func (s *sqlStore) ListHistory(ctx context.Context, nodeUUID string) ([]proto.HistoryEvent, error) {
	rows, err := s.query(ctx, s.rdb, "SELECT h.doc FROM node_history h JOIN nodes n ON n.id = h.node_id "+
		"WHERE n.uuid = ? ORDER BY h.id", nodeUUID)
	if err != nil {
		return nil, fmt.Errorf("list history of node %s: %w", nodeUUID, err)
	}
	defer rows.Close()
	out := []proto.HistoryEvent{}
	for rows.Next() {
		var doc []byte
		var ev proto.HistoryEvent
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("list history of node %s: %w", nodeUUID, err)
		}
		if err := json.Unmarshal(doc, &ev); err != nil {
			return nil, fmt.Errorf("decode history of node %s: %w", nodeUUID, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list history of node %s: %w", nodeUUID, err)
	}
	if len(out) == 0 {
		// No events, or no node?
		if _, err := s.nodeID(ctx, s.rdb, nodeUUID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *sqlStore) PutInventory(ctx context.Context, nodeUUID string, inventory, pluginData json.RawMessage) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := s.exec(ctx, tx, "INSERT INTO node_inventory (node_id, inventory, plugin_data, updated_at) "+
			"SELECT id, CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT) FROM nodes WHERE uuid = ? "+
			"ON CONFLICT (node_id) DO UPDATE SET inventory = excluded.inventory, "+
			"plugin_data = excluded.plugin_data, updated_at = excluded.updated_at",
			rawText(inventory), rawText(pluginData), s.now().UnixMicro(), nodeUUID)
		return affectedOne(r, err, "store inventory of node "+nodeUUID, "node "+nodeUUID)
	})
	if err == nil {
		s.wrote(writeInventory)
	}
	return err
}

// rawText stores raw JSON as text (NULL for none).
func rawText(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func (s *sqlStore) GetInventory(ctx context.Context, nodeUUID string) (json.RawMessage, json.RawMessage, error) {
	var inv, plugin sql.NullString
	err := s.queryRow(ctx, s.rdb, "SELECT i.inventory, i.plugin_data FROM node_inventory i "+
		"JOIN nodes n ON n.id = i.node_id WHERE n.uuid = ?", nodeUUID).Scan(&inv, &plugin)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("inventory of node %s: %w", nodeUUID, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get inventory of node %s: %w", nodeUUID, err)
	}
	var a, b json.RawMessage
	if inv.Valid {
		a = json.RawMessage(inv.String)
	}
	if plugin.Valid {
		b = json.RawMessage(plugin.String)
	}
	return a, b, nil
}

// ---- conductors ----

func (s *sqlStore) RegisterConductor(ctx context.Context, c Conductor) error {
	if c.Hostname == "" {
		return errors.New("register conductor: no hostname")
	}
	drivers := c.Drivers
	if drivers == nil {
		drivers = []string{}
	}
	d, err := json.Marshal(drivers)
	if err != nil {
		return fmt.Errorf("register conductor %s: %w", c.Hostname, err)
	}
	now := s.now().UnixMicro()
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, "INSERT INTO conductors (hostname, conductor_group, drivers, online, created_at, updated_at) "+
			"VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hostname) DO UPDATE SET conductor_group = excluded.conductor_group, "+
			"drivers = excluded.drivers, online = excluded.online, updated_at = excluded.updated_at",
			c.Hostname, c.Group, string(d), true, now, now)
		if err != nil {
			return fmt.Errorf("register conductor %s: %w", c.Hostname, err)
		}
		return nil
	})
}

func (s *sqlStore) HeartbeatConductor(ctx context.Context, hostname string) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := s.exec(ctx, tx, "UPDATE conductors SET updated_at = ? WHERE hostname = ?", s.now().UnixMicro(), hostname)
		return affectedOne(r, err, "heartbeat of conductor "+hostname, "conductor "+hostname)
	})
}

func (s *sqlStore) UnregisterConductor(ctx context.Context, hostname string) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := s.exec(ctx, tx, "UPDATE conductors SET online = ? WHERE hostname = ?", false, hostname)
		return affectedOne(r, err, "unregister conductor "+hostname, "conductor "+hostname)
	})
}

func (s *sqlStore) ListConductors(ctx context.Context, aliveOnly bool) ([]Conductor, error) {
	cutoff := s.aliveCutoff()
	query := "SELECT hostname, conductor_group, drivers, online, created_at, updated_at FROM conductors"
	var args []any
	if aliveOnly {
		query += " WHERE online AND updated_at >= ?"
		args = append(args, cutoff)
	}
	rows, err := s.query(ctx, s.rdb, query+" ORDER BY hostname", args...)
	if err != nil {
		return nil, fmt.Errorf("list conductors: %w", err)
	}
	defer rows.Close()
	var out []Conductor
	for rows.Next() {
		var c Conductor
		var drivers []byte
		var online bool
		var created, updated int64
		if err := rows.Scan(&c.Hostname, &c.Group, &drivers, &online, &created, &updated); err != nil {
			return nil, fmt.Errorf("list conductors: %w", err)
		}
		if err := json.Unmarshal(drivers, &c.Drivers); err != nil {
			return nil, fmt.Errorf("decode drivers of conductor %s: %w", c.Hostname, err)
		}
		c.CreatedAt = time.UnixMicro(created).UTC()
		c.UpdatedAt = time.UnixMicro(updated).UTC()
		c.Alive = online && updated >= cutoff
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list conductors: %w", err)
	}
	return out, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
