package store

import (
	"context"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// A database created before migration 0018 gets provision_updated_at
// filled from each node's document, to the microsecond, and sorts on it.
func TestMigration18FillsProvisionUpdatedAt(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		st := openT(t, dsn, Options{Now: clock.Now}).(*sqlStore)
		times := []*proto.Time{
			{Time: time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)},
			nil,
			{Time: time.Date(2025, 12, 31, 23, 59, 59, 999999000, time.UTC)},
		}
		var uuids []string
		for i, pt := range times {
			n := &proto.Node{UUID: []string{"a0000000-0000-4000-8000-000000000001", "a0000000-0000-4000-8000-000000000002",
				"a0000000-0000-4000-8000-000000000003"}[i], Driver: "fake-hardware", ProvisionUpdatedAt: pt}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			uuids = append(uuids, n.UUID)
		}
		// Undo 0018's column values and forget it ran, then migrate again:
		// the backfill must rebuild them from the documents.
		if _, err := st.wdb.ExecContext(ctx, "UPDATE nodes SET provision_updated_at = 0"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.wdb.ExecContext(ctx, st.d.rebind("DELETE FROM schema_migrations WHERE version = ?"), 18); err != nil {
			t.Fatal(err)
		}
		// Re-running 0018 needs its objects gone; drop what it creates.
		for _, stmt := range dropFor18(st.d.numbered) {
			if _, err := st.wdb.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		if err := migrate(ctx, st.wdb, st.d, clock.Now()); err != nil {
			t.Fatal(err)
		}
		for i, pt := range times {
			var got int64
			if err := st.queryRow(ctx, st.rdb, "SELECT provision_updated_at FROM nodes WHERE uuid = ?", uuids[i]).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != micros(pt) {
				t.Errorf("node %d: provision_updated_at %d, want %d (%v)", i, got, micros(pt), pt)
			}
		}
		list, err := st.ListNodes(ctx, NodeQuery{SortKey: "provision_updated_at", SortDir: "desc"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 3 || list[0].UUID != uuids[0] || list[1].UUID != uuids[2] || list[2].UUID != uuids[1] {
			t.Errorf("sorted by provision_updated_at desc: %v", []string{list[0].UUID, list[1].UUID, list[2].UUID})
		}
	})
}

// dropFor18 undoes migration 0018 so the test can run it again.
func dropFor18(postgres bool) []string {
	stmts := []string{"DROP INDEX nodes_provision_updated_at", "DROP INDEX nodes_name_sort", "DROP INDEX nodes_created_at",
		"DROP INDEX nodes_updated_at", "DROP INDEX nodes_power_state", "DROP INDEX nodes_maintenance", "DROP INDEX nodes_fault",
		"DROP INDEX nodes_reservation_sort", "DROP INDEX ports_created_at", "DROP INDEX ports_updated_at",
		"ALTER TABLE nodes DROP COLUMN provision_updated_at"}
	if postgres {
		stmts = append(stmts, "DROP INDEX nodes_uuid_sort", "DROP INDEX ports_uuid_sort", "DROP INDEX ports_address_sort",
			"DROP INDEX nodes_provision_state", "DROP INDEX nodes_driver", "DROP INDEX nodes_conductor_group",
			"DROP INDEX nodes_resource_class", "DROP INDEX nodes_instance_uuid", "DROP INDEX nodes_owner", "DROP INDEX ports_node_id",
			"CREATE INDEX nodes_provision_state ON nodes (provision_state)", "CREATE INDEX nodes_driver ON nodes (driver)",
			"CREATE INDEX nodes_conductor_group ON nodes (conductor_group)", "CREATE INDEX nodes_resource_class ON nodes (resource_class)",
			"CREATE INDEX nodes_instance_uuid ON nodes (instance_uuid)", "CREATE INDEX nodes_owner ON nodes (owner)",
			"CREATE INDEX ports_node_id ON ports (node_id)")
	}
	return stmts
}
