package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
)

// SQLite result codes Kiln tells apart (primary codes are the low byte).
const (
	sqliteBusy             = 5
	sqliteLocked           = 6
	sqliteConstraintPK     = 1555
	sqliteConstraintUnique = 2067
	sqliteConstraintFK     = 787
)

var sqliteDialect = &dialect{
	name:       "sqlite",
	migrations: migrationsFor("sqlite"),
	retryable: func(err error) bool {
		var e *sqlite.Error
		if !errors.As(err, &e) {
			return false
		}
		c := e.Code() & 0xff
		return c == sqliteBusy || c == sqliteLocked
	},
	uniqueViolation: func(err error) string {
		var e *sqlite.Error
		if !errors.As(err, &e) || (e.Code() != sqliteConstraintUnique && e.Code() != sqliteConstraintPK) {
			return ""
		}
		// "... UNIQUE constraint failed: nodes.name (2067)"
		const marker = "constraint failed: "
		i := strings.LastIndex(e.Error(), marker)
		if i < 0 {
			return ""
		}
		col := e.Error()[i+len(marker):]
		if i := strings.IndexAny(col, " ,("); i >= 0 {
			col = col[:i]
		}
		return strings.ReplaceAll(col, ".", "_") + "_key"
	},
	foreignKeyViolation: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && e.Code() == sqliteConstraintFK
	},
}

// sqlitePath extracts the database file from "sqlite:///abs/path",
// "sqlite://rel/path" or a bare path.
func sqlitePath(dsn string) (string, error) {
	path := dsn
	if rest, ok := strings.CutPrefix(dsn, "sqlite://"); ok {
		path = rest
	} else if strings.Contains(dsn, "://") {
		return "", fmt.Errorf("open store %q: unknown database scheme (want sqlite:// or postgres://)", dsn)
	}
	switch {
	case path == "":
		return "", fmt.Errorf("open store %q: no database file", dsn)
	case strings.ContainsAny(path, "?#"):
		return "", fmt.Errorf("open store %q: the SQLite file name may not contain ? or #", dsn)
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return "", fmt.Errorf("open store %q: SQLite needs a plain file path", dsn)
	}
	return path, nil
}

// sqliteBusyTimeoutMS is how long a connection waits for another process's
// write lock before SQLITE_BUSY; the store then retries the transaction.
const sqliteBusyTimeoutMS = 10000

// The writer's and readers' pragmas beyond the defaults, each measured with
// strace -c on BenchmarkUpdateNode (1,000 fleet-shaped nodes, ~8 KB a row,
// 5,000 commits):
//
//   - cache_size: SQLite's default page cache is 2 MB per connection, a
//     quarter of that benchmark's nodes table (80 MB at 10,000 nodes), so
//     the writer re-read pages it had just written (19,700 preads; 15,200
//     with 64 MB). The cache fills only as pages are used. The readers keep
//     the default: in WAL mode a connection drops its whole cache when
//     another one has committed since its last read, which under the
//     fleet's write load is nearly every read, so a larger reader cache
//     would not be reused.
//   - wal_autocheckpoint(0): the commit that crossed 1,000 WAL pages ran the
//     checkpoint while holding the writer (the remaining 13,800 of those
//     preads and 150 of 159 fsyncs); walCheckpointer runs them instead.
//   - temp_store(MEMORY): sorts and temporary b-trees stay off the disk.
//   - mmap_size stays 0: modernc's SQLite supports it on linux, but WAL
//     pages are read with pread anyway, a reader unmaps its view whenever
//     the database changed under it, and every connection's mapped pages
//     count in kiln's RSS; it saved nothing measurable here.
const (
	sqliteWriterPragmas = "&_pragma=cache_size(-65536)&_pragma=wal_autocheckpoint(0)&_pragma=temp_store(MEMORY)"
	sqliteReaderPragmas = "&_pragma=temp_store(MEMORY)"
)

// openSQLite opens the file through two pools: one writer connection whose
// transactions begin IMMEDIATE (they take the write lock up front, so a
// read-then-write transaction never fails to upgrade), and a few read-only
// connections that WAL lets read concurrently with the writer.
func openSQLite(ctx context.Context, path string, opts Options) (Store, error) {
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", sqliteBusyTimeoutMS)
	w, err := sql.Open("sqlite", path+"?"+common+sqliteWriterPragmas+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	err = migrate(ctx, w, sqliteDialect, opts.Now())
	if err == nil {
		err = deriveWork(ctx, w, sqliteDialect)
	}
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", path+"?"+common+sqliteReaderPragmas+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	c, err := sql.Open("sqlite", path+"?"+common)
	if err == nil {
		c.SetMaxOpenConns(1)
		c.SetConnMaxLifetime(0)
		c.SetConnMaxIdleTime(0)
		err = c.PingContext(ctx)
	}
	if err != nil {
		w.Close()
		r.Close()
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	wal := newWALCheckpointer(c)
	wal.start()
	return &sqlStore{d: sqliteDialect, rdb: r, wdb: w, stmts: newStmtCache(r), wstmts: newStmtCache(w), gate: &writeGate{}, deadAfter: opts.DeadAfter, clock: opts.Now, wal: wal}, nil
}
