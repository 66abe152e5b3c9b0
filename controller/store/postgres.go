package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

var postgresDialect = &dialect{
	name:       "postgres",
	numbered:   true,
	forUpdate:  " FOR UPDATE",
	migrations: migrationsFor("postgres"),
	// Any fixed key: it only has to be the same for every Kiln.
	lockMigrations: "SELECT pg_advisory_xact_lock(4818002766357442560)",
	retryable: func(err error) bool {
		var e *pgconn.PgError
		// serialization_failure, deadlock_detected
		return errors.As(err, &e) && (e.Code == "40001" || e.Code == "40P01")
	},
	uniqueViolation: func(err error) string {
		var e *pgconn.PgError
		if errors.As(err, &e) && e.Code == "23505" {
			return e.ConstraintName
		}
		return ""
	},
	foreignKeyViolation: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23503"
	},
}

// openPostgres opens a pool on a PostgreSQL database that several
// controllers may share: row locks (SELECT ... FOR UPDATE) and conditional
// UPDATEs keep their writes apart, an advisory lock their migrations.
func openPostgres(ctx context.Context, dsn string, opts Options) (Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL store: %w", err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open PostgreSQL store: %w", err)
	}
	err = migrate(ctx, db, postgresDialect, opts.Now())
	if err == nil {
		err = deriveWork(ctx, db, postgresDialect)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open PostgreSQL store: %w", err)
	}
	return &sqlStore{d: postgresDialect, rdb: db, wdb: db, deadAfter: opts.DeadAfter, clock: opts.Now}, nil
}
