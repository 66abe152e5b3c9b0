package store

import (
	"context"
	"database/sql"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// migratedBefore opens dsn's database with the schema as it was before the
// migration whose file name starts with first (e.g. "0030_"), so an upgrade
// test can store rows in the old shape before the store opens it.
func migratedBefore(t *testing.T, ctx context.Context, dsn, first string) (dialect, *sql.DB) {
	t.Helper()
	d, db := *sqliteDialect, (*sql.DB)(nil)
	var err error
	if path, ok := strings.CutPrefix(dsn, "sqlite://"); ok {
		db, err = sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	} else {
		d = *postgresDialect
		db, err = sql.Open("pgx", dsn)
	}
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	err = fs.WalkDir(d.migrations, ".", func(name string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || name >= first {
			return err
		}
		b, err := fs.ReadFile(d.migrations, name)
		before[name] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	d.migrations = before
	if err := migrate(ctx, db, &d, time.Now()); err != nil {
		t.Fatal(err)
	}
	return d, db
}
