package store

import (
	"context"
	"database/sql"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// A database from before migration 0022 may hold nodes whose documents
// name chassis that never existed (the field was stored unchecked): 0022
// clears those references, so the nodes stay readable and writable under
// the new foreign key.
func TestMigration22ClearsUncheckedChassis(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
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
		// The schema as it was before 0022.
		before := fstest.MapFS{}
		err = fs.WalkDir(d.migrations, ".", func(name string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || strings.HasPrefix(name, "0022_") {
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
		for _, n := range []struct{ uuid, doc string }{
			{"a0000000-0000-4000-8000-000000000001", `{"uuid":"a0000000-0000-4000-8000-000000000001","driver":"fake-hardware","chassis_uuid":"nowhere"}`},
			{"a0000000-0000-4000-8000-000000000002", `{"uuid":"a0000000-0000-4000-8000-000000000002","driver":"fake-hardware","chassis_uuid":null}`},
		} {
			if _, err := db.ExecContext(ctx, d.rebind("INSERT INTO nodes (uuid, driver, doc) VALUES (?, ?, ?)"), n.uuid, "fake-hardware", n.doc); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()

		st := openT(t, dsn, Options{})
		for _, id := range []string{"a0000000-0000-4000-8000-000000000001", "a0000000-0000-4000-8000-000000000002"} {
			n, err := st.GetNode(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if n.ChassisUUID != nil {
				t.Errorf("node %s: chassis_uuid %q after 0022, want none", id, *n.ChassisUUID)
			}
			if _, err := st.UpdateNode(ctx, id, func(n *proto.Node) error { n.Driver = "fake-hardware"; return nil }); err != nil {
				t.Errorf("update of node %s after 0022: %v", id, err)
			}
		}
		if list, err := st.ListNodes(ctx, NodeQuery{ChassisUUID: "nowhere"}); err != nil || len(list) != 0 {
			t.Errorf("nodes of the unchecked chassis: %v, %v", list, err)
		}
	})
}
