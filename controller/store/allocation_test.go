package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/pgtest"
)

func allocationsT(t *testing.T, st Store) *Resources[proto.Allocation] {
	t.Helper()
	rs, err := NewResources(st, AllocationResource)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestAllocationsStore: names are unique, the filters select by column and
// the document round-trips, on each backend.
func TestAllocationsStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		rs := allocationsT(t, st)
		mk := func(i int, name, rc, state, owner string) *proto.Allocation {
			a := &proto.Allocation{UUID: fmt.Sprintf("aaaaaaaa-0000-4000-8000-%012d", i), State: state,
				ResourceClass: strp(rc), Traits: []string{"CUSTOM_A"}, CandidateNodes: []string{}, Extra: proto.Dict{}}
			if name != "" {
				a.Name = strp(name)
			}
			if owner != "" {
				a.Owner = strp(owner)
			}
			if err := rs.Create(ctx, a); err != nil {
				t.Fatal(err)
			}
			return a
		}
		mk(1, "a1", "gold", proto.AllocationAllocating, "p1")
		mk(2, "", "gold", proto.AllocationError, "")
		mk(3, "", "silver", proto.AllocationAllocating, "p2")
		err := rs.Create(ctx, &proto.Allocation{UUID: "aaaaaaaa-0000-4000-8000-000000000009", Name: strp("a1"), State: "allocating"})
		if !errors.Is(err, ErrDuplicateAllocationName) {
			t.Errorf("a second allocation named a1: %v, want ErrDuplicateAllocationName", err)
		}
		if _, err := rs.Update(ctx, "aaaaaaaa-0000-4000-8000-000000000002", func(a *proto.Allocation) error {
			a.Name = strp("a1")
			return nil
		}); !errors.Is(err, ErrDuplicateAllocationName) {
			t.Errorf("renaming to a taken name: %v, want ErrDuplicateAllocationName", err)
		}
		for _, tc := range []struct {
			filters map[string]string
			want    []int
		}{
			{nil, []int{1, 2, 3}},
			{map[string]string{"state": "allocating"}, []int{1, 3}},
			{map[string]string{"resource_class": "gold"}, []int{1, 2}},
			{map[string]string{"owner": "p2"}, []int{3}},
			{map[string]string{"name": "a1"}, []int{1}},
			{map[string]string{"state": "allocating", "resource_class": "gold"}, []int{1}},
			{map[string]string{"node_uuid": "x"}, nil},
		} {
			got, err := rs.List(ctx, Query{Filters: tc.filters})
			if err != nil {
				t.Fatal(err)
			}
			var ids []int
			for _, a := range got {
				var i int
				fmt.Sscanf(a.UUID[24:], "%d", &i)
				ids = append(ids, i)
				if !slices.Equal(a.Traits, []string{"CUSTOM_A"}) {
					t.Errorf("traits not kept: %+v", a)
				}
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("filters %v: %v, want %v", tc.filters, ids, tc.want)
			}
		}
		got, err := rs.List(ctx, Query{SortKey: "name", SortDir: "desc", Limit: 1})
		if err != nil || len(got) != 1 || got[0].Name == nil || *got[0].Name != "a1" {
			t.Errorf("sorted by name desc: %v %v", got, err)
		}
	})
}

// allocationPlans are the allocation list queries: every sort key in both
// directions and every filter, with and without a marker.
func allocationPlans(t *testing.T, st *sqlStore) []resourcePlan {
	t.Helper()
	ctx := context.Background()
	rs := allocationsT(t, st)
	a := &proto.Allocation{UUID: "77777777-2222-4333-8444-555555555555", State: "allocating"}
	if err := rs.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	var out []resourcePlan
	for _, marker := range []string{"", a.UUID} {
		for _, key := range rs.SortKeys() {
			for _, dir := range []string{"asc", "desc"} {
				query, args, err := st.listQuery(ctx, rs.r.Table, "doc", rs.exprs, nil, nil, key, dir, marker, 100)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, resourcePlan{fmt.Sprintf("allocations sort %s %s, marker %q", key, dir, marker), query, args, marker != ""})
			}
		}
		for name, col := range rs.r.Filters {
			query, args, err := st.listQuery(ctx, rs.r.Table, "doc", rs.exprs, []string{col + " = ?"}, []any{"x"}, "", "", marker, 100)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, resourcePlan{fmt.Sprintf("allocations filter %s, marker %q", name, marker), query, args, true})
		}
	}
	return out
}

// TestAllocationListPlansAreIndexed: every allocation list is read from an
// index in list order (SQLite's planner), as TestListPlansAreIndexed checks
// for nodes.
func TestAllocationListPlansAreIndexed(t *testing.T) {
	st := openT(t, "sqlite://"+t.TempDir()+"/k.db", Options{}).(*sqlStore)
	for _, r := range allocationPlans(t, st) {
		plan := explainSQLite(t, st, r.query, r.args)
		if strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s sorts the whole result:\n%s\n%s", r.what, r.query, plan)
		}
		if r.seek && !strings.Contains(plan, "SEARCH") {
			t.Errorf("%s scans instead of seeking:\n%s\n%s", r.what, r.query, plan)
		}
	}
}

// TestAllocationListPlansAreIndexedPostgres is the same with PostgreSQL's
// planner, sequential and bitmap scans priced out.
func TestAllocationListPlansAreIndexedPostgres(t *testing.T) {
	ctx := context.Background()
	st := openT(t, pgtest.DSN(t), Options{}).(*sqlStore)
	for _, r := range allocationPlans(t, st) {
		func() {
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
			rows, err := tx.QueryContext(ctx, "EXPLAIN "+st.d.rebind(r.query), r.args...)
			if err != nil {
				t.Fatalf("explain %s: %v", r.query, err)
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
				t.Errorf("%s is not read in index order:\n%s\n%s", r.what, r.query, plan.String())
			}
		}()
	}
}
