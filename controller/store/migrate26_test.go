package store

import (
	"context"
	"slices"
	"testing"
)

// Nodes stored before migration 0026 keep shard, parent_node and
// instance_name in their documents only: 0026 copies them into the new
// columns, so the filters and GET /v1/shards see them at once.
func TestMigration26FillsNodeColumns(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		d, db := migratedBefore(t, ctx, dsn, "0026_")
		const parent, kid = "b0000000-0000-4000-8000-000000000001", "b0000000-0000-4000-8000-000000000002"
		for _, n := range []struct{ uuid, doc string }{
			{parent, `{"uuid":"` + parent + `","driver":"fake-hardware","shard":"s1"}`},
			{kid, `{"uuid":"` + kid + `","driver":"fake-hardware","shard":"s1","parent_node":"` + parent + `","instance_name":"web"}`},
		} {
			if _, err := db.ExecContext(ctx, d.rebind("INSERT INTO nodes (uuid, driver, doc) VALUES (?, ?, ?)"), n.uuid, "fake-hardware", n.doc); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()

		st := openT(t, dsn, Options{})
		shards, err := Shards(ctx, st)
		if err != nil || len(shards) != 1 || shards[0] != (Shard{Name: "s1", Count: 2}) {
			t.Errorf("shards after 0026: %v, %v", shards, err)
		}
		if kids, err := Children(ctx, st, parent); err != nil || !slices.Equal(kids, []string{kid}) {
			t.Errorf("children after 0026: %v, %v", kids, err)
		}
		if l, err := st.ListNodes(ctx, NodeQuery{InstanceName: "web"}); err != nil || len(l) != 1 || l[0].UUID != kid {
			t.Errorf("instance_name filter after 0026: %v, %v", l, err)
		}
		if l, err := st.ListNodes(ctx, NodeQuery{NoChildren: true}); err != nil || len(l) != 1 || l[0].UUID != parent {
			t.Errorf("list without children after 0026: %v, %v", l, err)
		}
	})
}
