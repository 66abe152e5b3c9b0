package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// stepResourcePlans are the list queries of deploy templates, runbooks,
// inspection rules and volume connectors and targets (resourcePlans' part for them).
func stepResourcePlans(t *testing.T, st *sqlStore) []resourcePlan {
	t.Helper()
	out := plansOf(t, st, DeployTemplateResource, &proto.DeployTemplate{UUID: "77777777-2222-4333-8444-555555555556", Name: "CUSTOM_X"})
	out = append(out, plansOf(t, st, RunbookResource, &proto.Runbook{UUID: "77777777-2222-4333-8444-555555555557", Name: "CUSTOM_X"})...)
	out = append(out, plansOf(t, st, InspectionRuleResource, &proto.InspectionRule{UUID: "77777777-2222-4333-8444-55555555555a", Phase: "main"})...)
	node := "11111111-2222-4333-8444-555555555555" // the callers' node
	out = append(out, plansOf(t, st, VolumeConnectorResource, &proto.VolumeConnector{UUID: "77777777-2222-4333-8444-555555555558",
		NodeUUID: node, Type: "iqn", ConnectorID: "iqn.x"})...)
	out = append(out, plansOf(t, st, VolumeTargetResource, &proto.VolumeTarget{UUID: "77777777-2222-4333-8444-555555555559",
		NodeUUID: node, VolumeType: "iscsi", VolumeID: "v1"})...)
	return out
}

// plansOf stores v and returns r's list queries: each sort key in both
// directions with and without a marker, and each filter in the default
// order.
func plansOf[T any](t *testing.T, st *sqlStore, r Resource[T], v *T) []resourcePlan {
	t.Helper()
	ctx := context.Background()
	rs, err := NewResources(st, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Create(ctx, v); err != nil {
		t.Fatal(err)
	}
	uuid := *rs.UUID(v)
	var out []resourcePlan
	for _, key := range rs.SortKeys() {
		for _, dir := range []string{"asc", "desc"} {
			for _, marker := range []string{"", uuid} {
				query, args, err := st.listQuery(ctx, r.Table, "doc", rs.exprs, nil, nil, key, dir, marker, 100)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, resourcePlan{fmt.Sprintf("%s sort %s %s, marker %q", r.Kind, key, dir, marker), query, args, marker != ""})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Filters)) {
		for _, marker := range []string{"", uuid} {
			query, args, err := st.listQuery(ctx, r.Table, "doc", rs.exprs, []string{r.Filters[name] + " = ?"}, []any{"x"}, "", "", marker, 100)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, resourcePlan{fmt.Sprintf("%s filter %s, marker %q", r.Kind, name, marker), query, args, true})
		}
	}
	return out
}
