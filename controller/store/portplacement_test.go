package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// placementPlans are the port and port group lists by a node's conductor
// group and shard (migration 0030's columns), one value each as a client
// usually asks: each must seek its index in list order.
func placementPlans(t *testing.T, st *sqlStore, marker string, pgs *Resources[proto.Portgroup]) []resourcePlan {
	t.Helper()
	ctx := context.Background()
	var out []resourcePlan
	for _, name := range slices.Sorted(maps.Keys(pgs.r.InFilters)) {
		query, args, err := st.listQuery(ctx, "portgroups", "doc", pgs.exprs, []string{pgs.r.InFilters[name] + " IN (?)"}, []any{"x"}, "", "", marker, 100)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resourcePlan{fmt.Sprintf("portgroup filter %s, marker %q", name, marker), query, args, true})
	}
	for what, q := range map[string]PortQuery{"conductor group": {ConductorGroups: []string{"x"}}, "shard": {Shards: []string{"x"}}} {
		where, args := portPlacementWhere(q, nil, nil)
		query, args, err := st.listQuery(ctx, "ports", "doc", portSortExprs, where, args, "", "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resourcePlan{"ports by node " + what, query, args, true})
	}
	return out
}

// TestPortPlacementFollowsNode: the conductor group and shard that port
// and port group lists filter on are the node's, when the port is created,
// when it moves to another node and when the node's change.
func TestPortPlacementFollowsNode(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		pgs := portgroupsT(t, st)
		s1 := "s1"
		nodes := []*proto.Node{
			{UUID: "10000000-0000-4000-8000-000000000001", Driver: "fake-hardware", ConductorGroup: "a", Shard: &s1},
			{UUID: "10000000-0000-4000-8000-000000000002", Driver: "fake-hardware", ConductorGroup: "b"},
			{UUID: "10000000-0000-4000-8000-000000000003", Driver: "fake-hardware"},
		}
		for i, n := range nodes {
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			p := &proto.Port{UUID: fmt.Sprintf("20000000-0000-4000-8000-00000000000%d", i+1), Address: fmt.Sprintf("52:54:00:00:00:0%d", i+1), NodeUUID: n.UUID}
			if err := st.CreatePort(ctx, p); err != nil {
				t.Fatal(err)
			}
			if err := pgs.Create(ctx, &proto.Portgroup{UUID: fmt.Sprintf("30000000-0000-4000-8000-00000000000%d", i+1), NodeUUID: n.UUID}); err != nil {
				t.Fatal(err)
			}
		}
		ports := func(q PortQuery) []string {
			t.Helper()
			got, err := st.ListPorts(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, p := range got {
				out = append(out, p.UUID[len(p.UUID)-1:])
			}
			return out
		}
		groups := func(filter, value string) []string {
			t.Helper()
			got, err := pgs.List(ctx, Query{Filters: map[string]string{filter: value}})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, pg := range got {
				out = append(out, pg.UUID[len(pg.UUID)-1:])
			}
			return out
		}
		check := func(step string, q PortQuery, filter, value string, want ...string) {
			t.Helper()
			if got := ports(q); !slices.Equal(got, want) {
				t.Errorf("%s: ports %+v = %v, want %v", step, q, got, want)
			}
			if got := groups(filter, value); !slices.Equal(got, want) {
				t.Errorf("%s: port groups %s=%s = %v, want %v", step, filter, value, got, want)
			}
		}
		check("created", PortQuery{ConductorGroups: []string{"a"}}, "conductor_group", "a", "1")
		check("created", PortQuery{ConductorGroups: []string{"a", "b"}}, "conductor_group", "a,b", "1", "2")
		check("created", PortQuery{Shards: []string{"s1"}}, "shard", "s1", "1")
		check("created", PortQuery{ConductorGroups: []string{"c"}}, "conductor_group", "c")

		// Node 2 joins group a and shard s1: its port and group follow.
		if _, err := st.UpdateNode(ctx, nodes[1].UUID, func(n *proto.Node) error {
			n.ConductorGroup, n.Shard = "a", &s1
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		check("node 2 moved", PortQuery{ConductorGroups: []string{"a"}}, "conductor_group", "a", "1", "2")
		check("node 2 moved", PortQuery{Shards: []string{"s1"}}, "shard", "s1", "1", "2")
		check("node 2 moved", PortQuery{ConductorGroups: []string{"b"}}, "conductor_group", "b")

		// Port and group 1 move to node 3 (no group, no shard).
		if _, err := st.UpdatePort(ctx, "20000000-0000-4000-8000-000000000001", func(p *proto.Port) error {
			p.NodeUUID = nodes[2].UUID
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := pgs.Update(ctx, "30000000-0000-4000-8000-000000000001", func(pg *proto.Portgroup) error {
			pg.NodeUUID = nodes[2].UUID
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		check("port 1 moved", PortQuery{ConductorGroups: []string{"a"}}, "conductor_group", "a", "2")
		check("port 1 moved", PortQuery{ConductorGroups: []string{""}}, "conductor_group", "", "1", "3")
		check("port 1 moved", PortQuery{Shards: []string{"s1"}}, "shard", "s1", "2")
	})
}

// TestPortDescriptionFilter: ports listed by a substring of their
// description, any case, wildcards matched as themselves, on both
// databases.
func TestPortDescriptionFilter(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		n := &proto.Node{UUID: "50000000-0000-4000-8000-000000000001", Driver: "fake-hardware"}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		for i, d := range []string{"Uplink to TOR-1", "100% spare_port", ""} {
			p := &proto.Port{UUID: fmt.Sprintf("50000000-0000-4000-8000-00000000001%d", i), Address: fmt.Sprintf("52:54:00:00:50:0%d", i), NodeUUID: n.UUID}
			if d != "" {
				p.Description = &d
			}
			if err := st.CreatePort(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		for sub, want := range map[string][]string{"tor-1": {"0"}, "%": {"1"}, "e_p": {"1"}, "o_t": nil, "p": {"0", "1"}} {
			got, err := st.ListPorts(ctx, PortQuery{DescriptionContains: sub, NodeUUID: n.UUID})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, p := range got {
				ids = append(ids, p.UUID[len(p.UUID)-1:])
			}
			if !slices.Equal(ids, want) {
				t.Errorf("description contains %q: %v, want %v", sub, ids, want)
			}
		}
	})
}
