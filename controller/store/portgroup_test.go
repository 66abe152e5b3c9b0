package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func portgroupsT(t *testing.T, st Store) *Resources[proto.Portgroup] {
	t.Helper()
	rs, err := NewResources(st, PortgroupResource)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestPortgroupsStore drives port groups on each backend: unique names and
// addresses, lookups by name, the node filter, ports joining a group, a
// group's delete refused while it has ports, and a node's delete taking
// its groups and ports along.
func TestPortgroupsStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		rs := portgroupsT(t, st)
		nodes := []string{"bbbbbbbb-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"}
		for _, u := range nodes {
			if err := st.CreateNode(ctx, &proto.Node{UUID: u, Driver: "fake-hardware"}); err != nil {
				t.Fatal(err)
			}
		}
		pg := func(i int, node string) *proto.Portgroup {
			return &proto.Portgroup{UUID: fmt.Sprintf("cccccccc-0000-4000-8000-00000000000%d", i), NodeUUID: node,
				Name: strp(fmt.Sprintf("bond%d", i)), Address: strp(fmt.Sprintf("52:54:00:00:00:0%d", i))}
		}
		a, b, c := pg(1, nodes[0]), pg(2, nodes[0]), pg(3, nodes[1])
		for _, p := range []*proto.Portgroup{a, b, c} {
			if err := rs.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		dupName, dupMAC := pg(4, nodes[0]), pg(5, nodes[0])
		dupName.Name = a.Name
		dupMAC.Address = strp("52:54:00:00:00:01")
		if err := rs.Create(ctx, dupName); !errors.Is(err, ErrDuplicatePortgroupName) {
			t.Errorf("duplicate name: %v", err)
		}
		if err := rs.Create(ctx, dupMAC); !errors.Is(err, ErrDuplicatePortgroupMAC) {
			t.Errorf("duplicate address: %v", err)
		}
		if err := rs.Create(ctx, pg(6, "bbbbbbbb-0000-4000-8000-00000000dead")); !errors.Is(err, ErrMissingReference) {
			t.Errorf("a port group of a node that does not exist: %v, want ErrMissingReference", err)
		}
		if got, err := rs.GetByName(ctx, "bond2"); err != nil || got.UUID != b.UUID {
			t.Errorf("GetByName(bond2) = %v, %v", got, err)
		}
		if _, err := rs.GetByName(ctx, "bond9"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetByName(bond9): %v, want ErrNotFound", err)
		}
		list, err := rs.List(ctx, Query{Filters: map[string]string{"node_uuid": nodes[0]}, SortKey: "name", SortDir: "desc"})
		if err != nil || len(list) != 2 || list[0].UUID != b.UUID || list[1].UUID != a.UUID {
			t.Errorf("node 0's groups by name desc: %v, %v", list, err)
		}
		if list, err := rs.List(ctx, Query{Filters: map[string]string{"address": "52:54:00:00:00:03"}}); err != nil || len(list) != 1 || list[0].UUID != c.UUID {
			t.Errorf("by address: %v, %v", list, err)
		}

		port := &proto.Port{UUID: "dddddddd-0000-4000-8000-000000000001", Address: "52:54:00:00:01:01", NodeUUID: nodes[0], PortgroupUUID: &a.UUID}
		if err := st.CreatePort(ctx, port); err != nil {
			t.Fatal(err)
		}
		missing := "cccccccc-0000-4000-8000-0000000000ff"
		stray := &proto.Port{UUID: "dddddddd-0000-4000-8000-000000000002", Address: "52:54:00:00:01:02", NodeUUID: nodes[0], PortgroupUUID: &missing}
		if err := st.CreatePort(ctx, stray); !errors.Is(err, ErrMissingReference) {
			t.Errorf("port in a group that does not exist: %v, want ErrMissingReference", err)
		}
		if ports, err := st.ListPorts(ctx, PortQuery{PortgroupUUID: a.UUID}); err != nil || len(ports) != 1 || ports[0].UUID != port.UUID {
			t.Errorf("ports of bond1: %v, %v", ports, err)
		}
		if ports, err := st.ListPorts(ctx, PortQuery{PortgroupUUID: b.UUID}); err != nil || len(ports) != 0 {
			t.Errorf("ports of bond2: %v, %v", ports, err)
		}
		if err := rs.Delete(ctx, a.UUID); !errors.Is(err, ErrInUse) {
			t.Errorf("delete of a group with a port: %v, want ErrInUse", err)
		}
		if _, err := st.UpdatePort(ctx, port.UUID, func(p *proto.Port) error { p.PortgroupUUID = &missing; return nil }); !errors.Is(err, ErrMissingReference) {
			t.Errorf("port moved to a group that does not exist: %v", err)
		}
		if _, err := st.UpdatePort(ctx, port.UUID, func(p *proto.Port) error { p.PortgroupUUID = nil; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := rs.Delete(ctx, a.UUID); err != nil {
			t.Errorf("delete of the emptied group: %v", err)
		}
		if _, err := st.UpdatePort(ctx, port.UUID, func(p *proto.Port) error { p.PortgroupUUID = &b.UUID; return nil }); err != nil {
			t.Fatal(err)
		}
		// The node's delete takes its groups and their ports along.
		if err := st.DeleteNode(ctx, nodes[0]); err != nil {
			t.Fatalf("delete of a node with a port group and a member port: %v", err)
		}
		if _, err := rs.Get(ctx, b.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("group of the deleted node: %v", err)
		}
		if _, err := st.GetPort(ctx, port.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("port of the deleted node: %v", err)
		}
		if all, err := rs.List(ctx, Query{}); err != nil || len(all) != 1 || all[0].UUID != c.UUID {
			t.Errorf("after the node's delete: %v, %v", all, err)
		}
	})
}

// portgroupPlans are the list queries of port groups (each sort key and
// filter, with and without a marker) and of a group's ports, for
// TestListPlansAreIndexed.
func portgroupPlans(t *testing.T, st *sqlStore) []resourcePlan {
	t.Helper()
	ctx := context.Background()
	node := "88888888-2222-4333-8444-555555555555"
	if err := st.CreateNode(ctx, &proto.Node{UUID: node, Driver: "fake-hardware"}); err != nil {
		t.Fatal(err)
	}
	rs := portgroupsT(t, st)
	pg := &proto.Portgroup{UUID: "99999999-2222-4333-8444-555555555555", NodeUUID: node}
	if err := rs.Create(ctx, pg); err != nil {
		t.Fatal(err)
	}
	var out []resourcePlan
	for _, marker := range []string{"", pg.UUID} {
		for _, key := range rs.SortKeys() {
			for _, dir := range []string{"asc", "desc"} {
				query, args, err := st.listQuery(ctx, rs.r.Table, "doc", rs.exprs, nil, nil, key, dir, marker, 100)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, resourcePlan{fmt.Sprintf("portgroup sort %s %s, marker %q", key, dir, marker), query, args, marker != ""})
			}
		}
		for name, col := range rs.r.Filters {
			query, args, err := st.listQuery(ctx, rs.r.Table, "doc", rs.exprs, []string{col + " = ?"}, []any{"x"}, "", "", marker, 100)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, resourcePlan{fmt.Sprintf("portgroup filter %s, marker %q", name, marker), query, args, true})
		}
		query, args, err := st.listQuery(ctx, "ports", "doc", portSortExprs, []string{"portgroup_uuid = ?"}, []any{pg.UUID}, "", "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resourcePlan{"ports of a port group", query, args, true})
		out = append(out, placementPlans(t, st, marker, rs)...)
	}
	return out
}
