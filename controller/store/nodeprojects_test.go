package store

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestNodeProjectFilter: ?project= keeps the nodes the project owns or
// leases, once each, in list order and by pages, on both databases; the
// rows follow owner and lessee changes and go with their node.
func TestNodeProjectFilter(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		str := func(s string) *string { return &s }
		nodes := []*proto.Node{
			{Owner: str("proj-a")},
			{Owner: str("proj-b"), Lessee: str("proj-a")},
			{Owner: str("proj-a"), Lessee: str("proj-a")},
			{},
			{Owner: str("proj-b")},
			{Owner: str(""), Lessee: str("")},
		}
		uuid := func(i int) string { return fmt.Sprintf("50000000-0000-4000-8000-00000000000%d", i) }
		for i, n := range nodes {
			n.UUID, n.Driver = uuid(i), "fake-hardware"
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
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
			{"owner or lessee", NodeQuery{Project: "proj-a"}, []int{0, 1, 2}},
			{"other project", NodeQuery{Project: "proj-b"}, []int{1, 4}},
			{"no such project", NodeQuery{Project: "proj-z"}, nil},
			{"first page", NodeQuery{Project: "proj-a", Limit: 2}, []int{0, 1}},
			{"next page", NodeQuery{Project: "proj-a", Limit: 2, Marker: uuid(1)}, []int{2}},
			{"descending", NodeQuery{Project: "proj-a", SortDir: "desc"}, []int{2, 1, 0}},
			{"with owner", NodeQuery{Project: "proj-a", Owner: "proj-b"}, []int{1}},
			{"summary", NodeQuery{Project: "proj-b", Summary: true}, []int{1, 4}},
		} {
			if got := list(c.q); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.what, got, c.want)
			}
		}

		// The rows follow the node's owner and lessee.
		for _, u := range []struct {
			i  int
			fn func(n *proto.Node)
		}{
			{0, func(n *proto.Node) { n.Owner = str("proj-c") }},
			{1, func(n *proto.Node) { n.Lessee = nil }},
			{3, func(n *proto.Node) { n.Lessee = str("proj-c") }},
			{4, func(n *proto.Node) { n.Description = str("unrelated change") }},
		} {
			if _, err := st.UpdateNode(ctx, uuid(u.i), func(n *proto.Node) error { u.fn(n); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			project string
			want    []int
		}{{"proj-a", []int{2}}, {"proj-b", []int{1, 4}}, {"proj-c", []int{0, 3}}} {
			if got := list(NodeQuery{Project: c.project}); !slices.Equal(got, c.want) {
				t.Errorf("%s after the updates: %v, want %v", c.project, got, c.want)
			}
		}

		if err := st.DeleteNode(ctx, uuid(2)); err != nil {
			t.Fatal(err)
		}
		if got := list(NodeQuery{Project: "proj-a"}); len(got) != 0 {
			t.Errorf("proj-a after deleting its node: %v", got)
		}
		s := st.(*sqlStore)
		var rows int
		if err := s.queryRow(ctx, s.rdb, "SELECT COUNT(*) FROM node_projects").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 4 { // 0 proj-c, 1 proj-b, 3 proj-c, 4 proj-b
			t.Errorf("node_projects holds %d rows, want 4", rows)
		}
	})
}

// TestNodeProjectsMigration: nodes stored before 0032 are found by their
// owner and lessee after it.
func TestNodeProjectsMigration(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		d, db := migratedBefore(t, ctx, dsn, "0032_")
		for i, owner := range []string{"old-a", "old-b", ""} {
			u := fmt.Sprintf("51000000-0000-4000-8000-00000000000%d", i)
			doc := fmt.Sprintf(`{"uuid":%q,"driver":"fake-hardware","owner":%q,"lessee":"old-l"}`, u, owner)
			if _, err := db.ExecContext(ctx, d.rebind("INSERT INTO nodes (uuid, driver, owner, doc) VALUES (?, ?, ?, ?)"), u, "fake-hardware", owner, doc); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		st := openT(t, dsn, Options{})
		for _, c := range []struct {
			project string
			want    int
		}{{"old-a", 1}, {"old-b", 1}, {"old-l", 3}, {"nobody", 0}} {
			got, err := st.ListNodes(ctx, NodeQuery{Project: c.project})
			if err != nil || len(got) != c.want {
				t.Errorf("project %q after 0032: %d nodes (%v), want %d", c.project, len(got), err, c.want)
			}
		}
	})
}
