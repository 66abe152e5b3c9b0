package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestNodeListFilters: retired, lessee, conductor and description_contains
// select the nodes whose documents say so, after updates too, on both
// databases; LIKE's wildcards in a description filter match themselves.
func TestNodeListFilters(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		str := func(s string) *string { return &s }
		nodes := []*proto.Node{
			{Driver: "fake-hardware", Retired: true, Lessee: str("tenant-a"), Conductor: str("c1"), Description: str("Rack 4, GPU box")},
			{Driver: "fake-hardware", Lessee: str("tenant-b"), Conductor: str("c2"), Description: str("100% spare_part")},
			{Driver: "fake-hardware", Conductor: str("c1")},
		}
		for i, n := range nodes {
			n.UUID = fmt.Sprintf("40000000-0000-4000-8000-00000000000%d", i)
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		yes, no := true, false
		list := func(q NodeQuery) []int {
			t.Helper()
			got, err := st.ListNodes(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []int
			for _, n := range got {
				out = append(out, int(n.UUID[len(n.UUID)-1]-'0'))
			}
			return out
		}
		for _, c := range []struct {
			what string
			q    NodeQuery
			want []int
		}{
			{"retired", NodeQuery{Retired: &yes}, []int{0}},
			{"not retired", NodeQuery{Retired: &no}, []int{1, 2}},
			{"lessee", NodeQuery{Lessee: "tenant-b"}, []int{1}},
			{"conductor", NodeQuery{Conductor: "c1"}, []int{0, 2}},
			{"conductor and retired", NodeQuery{Conductor: "c1", Retired: &no}, []int{2}},
			{"description, any case", NodeQuery{DescriptionContains: "gpu"}, []int{0}},
			{"description %", NodeQuery{DescriptionContains: "100%"}, []int{1}},
			{"description % alone", NodeQuery{DescriptionContains: "%"}, []int{1}},
			{"description _", NodeQuery{DescriptionContains: "e_p"}, []int{1}},
			{"description _ is no wildcard", NodeQuery{DescriptionContains: "k_4"}, nil},
			{"description absent", NodeQuery{DescriptionContains: "nothing"}, nil},
			{"summary", NodeQuery{Lessee: "tenant-a", Summary: true}, []int{0}},
		} {
			if got := list(c.q); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.what, got, c.want)
			}
		}
		// The columns follow the document.
		if _, err := st.UpdateNode(ctx, nodes[0].UUID, func(n *proto.Node) error {
			n.Retired, n.Lessee, n.Description = false, nil, str("spare")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := list(NodeQuery{Retired: &yes}); len(got) != 0 {
			t.Errorf("retired after unretiring: %v", got)
		}
		if got := list(NodeQuery{DescriptionContains: "SPARE"}); !slices.Equal(got, []int{0, 1}) {
			t.Errorf("description after the update: %v", got)
		}
		if got := list(NodeQuery{Lessee: "tenant-a"}); len(got) != 0 {
			t.Errorf("lessee after clearing it: %v", got)
		}
	})
}

// TestDescriptionFilterPlan: a description substring cannot seek an index,
// but the list still walks its order's index and never sorts the result,
// so a page costs what it reads, not the fleet.
func TestDescriptionFilterPlan(t *testing.T) {
	st := openT(t, "sqlite://"+t.TempDir()+"/k.db", Options{}).(*sqlStore)
	where, args := nodeWhere(NodeQuery{DescriptionContains: "x"})
	for _, key := range []string{"", "name", "provision_state"} {
		query, args, err := st.listQuery(context.Background(), "nodes", "doc", nodeSortExprs, where, args, key, "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if plan := explainSQLite(t, st, query, args); strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("sort %q sorts the whole result:\n%s", key, plan)
		}
	}
}
