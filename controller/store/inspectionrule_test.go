package store

import (
	"context"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestInspectionRules: on each backend, rules filter by phase, sort by
// priority, keep their conditions and actions, and DeleteAll empties the
// table and says how many it removed.
func TestInspectionRules(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		rs, err := NewResources(st, InspectionRuleResource)
		if err != nil {
			t.Fatal(err)
		}
		desc := "memory"
		act := []proto.InspectionRuleAction{{Op: "add-trait", Args: map[string]any{"name": "CUSTOM_BIG"}, Loop: []any{}}}
		rules := []*proto.InspectionRule{
			{UUID: "bbbbbbbb-0000-4000-8000-000000000001", Phase: "main", Priority: 10, Actions: act, Description: &desc,
				Conditions: []proto.InspectionRuleCondition{{Op: "gt", Args: []any{"{inventory[memory][physical_mb]}", 4096.0}}}},
			{UUID: "bbbbbbbb-0000-4000-8000-000000000002", Phase: "main", Priority: 90, Actions: act, Sensitive: true},
			{UUID: "bbbbbbbb-0000-4000-8000-000000000003", Phase: "other", Priority: 50, Actions: act, Links: []proto.Link{{Href: "x"}}},
		}
		for _, r := range rules {
			if err := rs.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := rs.List(ctx, Query{Filters: map[string]string{"phase": "main"}, SortKey: "priority", SortDir: "desc"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].UUID != rules[1].UUID || got[1].UUID != rules[0].UUID {
			t.Fatalf("main rules by priority: %+v", got)
		}
		if c := got[1].Conditions; len(c) != 1 || c[0].Op != "gt" || got[1].Description == nil || *got[1].Description != "memory" || !got[0].Sensitive {
			t.Errorf("stored rule changed: %+v", got[1])
		}
		if r, err := rs.Get(ctx, rules[2].UUID); err != nil || r.Links != nil {
			t.Errorf("stored with links: %+v, %v", r, err)
		}
		n, err := rs.DeleteAll(ctx)
		if err != nil || n != 3 {
			t.Fatalf("DeleteAll: %d, %v; want 3", n, err)
		}
		if left, err := rs.List(ctx, Query{}); err != nil || len(left) != 0 {
			t.Errorf("after DeleteAll: %+v, %v", left, err)
		}
		if n, err := rs.DeleteAll(ctx); err != nil || n != 0 {
			t.Errorf("DeleteAll of none: %d, %v", n, err)
		}
	})
}
