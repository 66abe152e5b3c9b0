package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/pgtest"
)

// explainSQLite returns SQLite's query plan for a query, one step a line.
func explainSQLite(t *testing.T, s *sqlStore, query string, args []any) string {
	t.Helper()
	rows, err := s.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	return b.String()
}

// TestListPlansAreIndexed checks, with SQLite's query planner, that every
// node list filter, every sort key in both directions and every marker page
// is answered from an index in list order: no sort of the whole result
// (TEMP B-TREE), no full scan to find a filter's rows or a marker's place.
// That is what keeps a page O(page) and not O(fleet).
func TestListPlansAreIndexed(t *testing.T) {
	ctx := context.Background()
	st := openT(t, "sqlite://"+t.TempDir()+"/k.db", Options{}).(*sqlStore)
	name := "n0"
	n := &proto.Node{UUID: "11111111-2222-4333-8444-555555555555", Name: &name, Driver: "fake-hardware"}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	yes := true
	filters := map[string]NodeQuery{
		"none":                {},
		"provision_state":     {ProvisionState: "active"},
		"driver":              {Driver: "ipmi"},
		"conductor_group":     {ConductorGroup: "rack1"},
		"owner":               {Owner: "tenant"},
		"resource_class":      {ResourceClass: "gold"},
		"fault":               {Fault: "power failure"},
		"maintenance":         {Maintenance: &yes},
		"instance_uuid":       {InstanceUUID: "x"},
		"chassis_uuid":        {ChassisUUID: "x"},
		"shard":               {Shards: []string{"s1"}},
		"parent_node":         {ParentNode: "x"},
		"instance_name":       {InstanceName: "x"},
		"no children":         {NoChildren: true},
		"driver, no children": {Driver: "ipmi", NoChildren: true},
		"retired":             {Retired: &yes},
		"lessee":              {Lessee: "tenant"},
		"conductor":           {Conductor: "c1"},
		"project":             {Project: "tenant"},
		"project, driver":     {Project: "tenant", Driver: "ipmi"},
	}
	check := func(what, query string, args []any, wantSeek bool) {
		t.Helper()
		plan := explainSQLite(t, st, query, args)
		if strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s sorts the whole result:\n%s\n%s", what, query, plan)
		}
		if wantSeek && !strings.Contains(plan, "SEARCH") {
			t.Errorf("%s scans instead of seeking:\n%s\n%s", what, query, plan)
		}
	}
	// The documents, as lists read them, and the row versions, as
	// /detail's kept renderings (ListNodeVersions) do.
	for _, cols := range []string{"doc", "id, row_version"} {
		for fname, q := range filters {
			for _, marker := range []string{"", n.UUID} {
				where, args := nodeWhere(q)
				query, args, err := st.listQuery(ctx, "nodes", cols, nodeSortExprs, where, args, "", "", marker, 100)
				if err != nil {
					t.Fatal(err)
				}
				// No filter, or only "not a child": the first page reads the
				// sort order's index from its start, skipping children.
				unfiltered := fname == "none" || fname == "no children"
				check(fmt.Sprintf("%s, filter %s, marker %q", cols, fname, marker), query, args, !unfiltered || marker != "")
				if fname == "none" && cols != "doc" {
					// The page of versions reads no row, only the index.
					if plan := explainSQLite(t, st, query, args); !strings.Contains(plan, "COVERING INDEX nodes_row_version") {
						t.Errorf("the versions of a page, marker %q, read rows:\n%s\n%s", marker, query, plan)
					}
				}
			}
		}
		for _, key := range NodeSortKeys {
			for _, dir := range []string{"asc", "desc"} {
				for _, marker := range []string{"", n.UUID} {
					query, args, err := st.listQuery(ctx, "nodes", cols, nodeSortExprs, nil, nil, key, dir, marker, 100)
					if err != nil {
						t.Fatal(err)
					}
					check(fmt.Sprintf("%s, sort %s %s, marker %q", cols, key, dir, marker), query, args, marker != "")
				}
			}
		}
	}
	p := &proto.Port{UUID: "66666666-2222-4333-8444-555555555555", Address: "52:54:00:00:00:01", NodeUUID: n.UUID}
	if err := st.CreatePort(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, key := range PortSortKeys {
		for _, dir := range []string{"asc", "desc"} {
			for _, marker := range []string{"", p.UUID} {
				query, args, err := st.listQuery(ctx, "ports", "doc", portSortExprs, nil, nil, key, dir, marker, 100)
				if err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("ports sort %s %s, marker %q", key, dir, marker), query, args, marker != "")
			}
		}
	}
	for _, marker := range []string{"", p.UUID} {
		query, args, err := st.listQuery(ctx, "ports", "doc", portSortExprs,
			[]string{"node_id = (SELECT id FROM nodes WHERE uuid = ?)"}, []any{n.UUID}, "", "", marker, 100)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("ports of a node, marker %q", marker), query, args, true)
	}
	for _, r := range resourcePlans(t, st) {
		check(r.what, r.query, r.args, r.seek)
	}
}

// resourcePlan is one list query of a described resource.
type resourcePlan struct {
	what, query string
	args        []any
	seek        bool // a marker page must start with a seek
}

// resourcePlans are the list queries of every described resource: each
// sort key, both directions, with and without a marker.
func resourcePlans(t *testing.T, st *sqlStore) []resourcePlan {
	t.Helper()
	ctx := context.Background()
	rs := chassisT(t, st)
	c := &proto.Chassis{UUID: "77777777-2222-4333-8444-555555555555"}
	if err := rs.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	var out []resourcePlan
	for _, key := range rs.SortKeys() {
		for _, dir := range []string{"asc", "desc"} {
			for _, marker := range []string{"", c.UUID} {
				query, args, err := st.listQuery(ctx, rs.r.Table, "doc", rs.exprs, nil, nil, key, dir, marker, 100)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, resourcePlan{fmt.Sprintf("%s sort %s %s, marker %q", rs.r.Kind, key, dir, marker), query, args, marker != ""})
			}
		}
	}
	out = append(out, portgroupPlans(t, st)...)
	return append(out, stepResourcePlans(t, st)...)
}

// TestListPlansAreIndexedPostgres is TestListPlansAreIndexed for
// PostgreSQL: with sequential and bitmap scans priced out (the test table
// is tiny, so the planner would otherwise read it whole),
// every list is read from an index in list order, with no Sort step.
func TestListPlansAreIndexedPostgres(t *testing.T) {
	ctx := context.Background()
	st := openT(t, pgtest.DSN(t), Options{}).(*sqlStore)
	name := "n0"
	n := &proto.Node{UUID: "11111111-2222-4333-8444-555555555555", Name: &name, Driver: "fake-hardware"}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	p := &proto.Port{UUID: "66666666-2222-4333-8444-555555555555", Address: "52:54:00:00:00:01", NodeUUID: n.UUID}
	if err := st.CreatePort(ctx, p); err != nil {
		t.Fatal(err)
	}
	explain := func(what, query string, args []any) {
		t.Helper()
		tx, err := st.rdb.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck // read-only
		for _, set := range []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"} {
			if _, err := tx.ExecContext(ctx, set); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := tx.QueryContext(ctx, "EXPLAIN "+st.d.rebind(query), args...)
		if err != nil {
			t.Fatalf("explain %s: %v", query, err)
		}
		defer rows.Close()
		var plan strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if strings.Contains(plan.String(), "Sort") || strings.Contains(plan.String(), "Seq Scan") {
			t.Errorf("%s is not read in index order:\n%s\n%s", what, query, plan.String())
		}
	}
	yes := true
	for fname, q := range map[string]NodeQuery{
		"provision_state": {ProvisionState: "active"}, "driver": {Driver: "ipmi"}, "conductor_group": {ConductorGroup: "r"},
		"owner": {Owner: "o"}, "resource_class": {ResourceClass: "c"}, "fault": {Fault: "f"}, "maintenance": {Maintenance: &yes},
		"chassis_uuid": {ChassisUUID: "x"}, "shard": {Shards: []string{"s1"}}, "parent_node": {ParentNode: "x"},
		"instance_name": {InstanceName: "x"}, "no children": {NoChildren: true},
		"retired": {Retired: &yes}, "lessee": {Lessee: "l"}, "conductor": {Conductor: "c"},
		"project": {Project: "p"},
	} {
		for _, marker := range []string{"", n.UUID} {
			where, args := nodeWhere(q)
			query, args, err := st.listQuery(ctx, "nodes", "doc", nodeSortExprs, where, args, "", "", marker, 100)
			if err != nil {
				t.Fatal(err)
			}
			explain(fmt.Sprintf("filter %s, marker %q", fname, marker), query, args)
		}
	}
	for _, key := range NodeSortKeys {
		for _, dir := range []string{"asc", "desc"} {
			for _, marker := range []string{"", n.UUID} {
				query, args, err := st.listQuery(ctx, "nodes", "doc", nodeSortExprs, nil, nil, key, dir, marker, 100)
				if err != nil {
					t.Fatal(err)
				}
				explain(fmt.Sprintf("sort %s %s, marker %q", key, dir, marker), query, args)
			}
		}
	}
	for _, key := range PortSortKeys {
		for _, marker := range []string{"", p.UUID} {
			query, args, err := st.listQuery(ctx, "ports", "doc", portSortExprs, nil, nil, key, "desc", marker, 100)
			if err != nil {
				t.Fatal(err)
			}
			explain(fmt.Sprintf("ports sort %s, marker %q", key, marker), query, args)
		}
	}
	query, args, err := st.listQuery(ctx, "ports", "doc", portSortExprs,
		[]string{"node_id = (SELECT id FROM nodes WHERE uuid = ?)"}, []any{n.UUID}, "", "", p.UUID, 100)
	if err != nil {
		t.Fatal(err)
	}
	explain("ports of a node", query, args)
	for _, r := range resourcePlans(t, st) {
		explain(r.what, r.query, r.args)
	}
}
