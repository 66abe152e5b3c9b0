package store

import (
	"context"
	"testing"
)

// Ports, port groups and nodes stored before migrations 0030 and 0031:
// the ports and groups get their node's conductor group and shard, the
// nodes' retired, lessee and conductor are read from their documents, and
// a port without 1.111's field is available for dynamic port groups.
func TestMigrations30And31FillColumns(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		d, db := migratedBefore(t, ctx, dsn, "0030_")
		const node, port, group = "c0000000-0000-4000-8000-000000000001", "c0000000-0000-4000-8000-000000000002", "c0000000-0000-4000-8000-000000000003"
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{"INSERT INTO nodes (uuid, driver, conductor_group, shard, doc) VALUES (?, ?, ?, ?, ?)", []any{node, "fake-hardware", "rack-z", "s9",
				`{"uuid":"` + node + `","driver":"fake-hardware","conductor_group":"rack-z","shard":"s9","retired":true,"lessee":"ten","conductor":"c7","description":"Old GPU box"}`}},
			{"INSERT INTO portgroups (uuid, node_uuid, doc) VALUES (?, ?, ?)", []any{group, node, `{"uuid":"` + group + `","node_uuid":"` + node + `"}`}},
			{"INSERT INTO ports (node_id, uuid, address, doc) VALUES ((SELECT id FROM nodes WHERE uuid = ?), ?, ?, ?)", []any{node, port, "52:54:00:00:30:01",
				`{"uuid":"` + port + `","address":"52:54:00:00:30:01","node_uuid":"` + node + `","pxe_enabled":true}`}},
		} {
			if _, err := db.ExecContext(ctx, d.rebind(q.sql), q.args...); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()

		st := openT(t, dsn, Options{})
		ps, err := st.ListPorts(ctx, PortQuery{ConductorGroups: []string{"rack-z"}, Shards: []string{"s9"}})
		if err != nil || len(ps) != 1 || ps[0].UUID != port || !ps[0].AvailableForDynamicPortgroup {
			t.Errorf("ports after 0030: %+v %v", ps, err)
		}
		pgs, err := NewResources(st, PortgroupResource)
		if err != nil {
			t.Fatal(err)
		}
		if l, err := pgs.List(ctx, Query{Filters: map[string]string{"conductor_group": "rack-z", "shard": "s9"}}); err != nil || len(l) != 1 || l[0].UUID != group {
			t.Errorf("port groups after 0030: %v %v", l, err)
		}
		yes := true
		if l, err := st.ListNodes(ctx, NodeQuery{Retired: &yes, Lessee: "ten", Conductor: "c7", DescriptionContains: "gpu"}); err != nil || len(l) != 1 || l[0].UUID != node {
			t.Errorf("nodes after 0031: %v %v", l, err)
		}
	})
}
