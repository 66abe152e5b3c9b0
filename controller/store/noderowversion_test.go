package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// versionOf is the node's NodeVersion as a list reads it.
func versionOf(t *testing.T, st Store, uuid string) NodeVersion {
	t.Helper()
	vv, ok := VersionedViewsOf(st)
	if !ok {
		t.Fatal("no versioned views")
	}
	views, err := vv.(*sqlStore).ListNodeViews(context.Background(), NodeQuery{})
	if err != nil {
		t.Fatal(err)
	}
	vers, err := vv.ListNodeVersions(context.Background(), NodeQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vers) != len(views) {
		t.Fatalf("%d versions, %d views", len(vers), len(views))
	}
	for i := range views {
		if views[i].UUID == uuid {
			return vers[i]
		}
	}
	t.Fatalf("node %s not listed", uuid)
	return NodeVersion{}
}

// TestRowVersionFollowsEveryWrite: every write that changes what the API
// renders of a node (an edit, a reservation taken, released, released for
// a dead conductor, an agent's heartbeat) bumps its row version, on both
// databases; NodeViewsByID reads the views and versions a page lists, and
// leaves out deleted nodes. On SQLite, openT's guard (guardRowVersion)
// also refuses any such write without the bump, which the last step
// proves.
func TestRowVersionFollowsEveryWrite(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		var uuids []string
		for i := range 3 {
			n := &proto.Node{UUID: fmt.Sprintf("7a000000-0000-4000-8000-%012d", i), Driver: "fake-hardware",
				ProvisionState: proto.StateDeployWait, DriverInfo: proto.Dict{"ipmi_password": "pw"},
				DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			uuids = append(uuids, n.UUID)
		}
		u := uuids[0]
		last := versionOf(t, st, u)
		if last.RowVersion != 0 {
			t.Fatalf("a new node's row version is %d, want 0", last.RowVersion)
		}
		step := func(name string, write func() error) {
			t.Helper()
			if err := write(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			v := versionOf(t, st, u)
			if v.ID != last.ID || v.RowVersion <= last.RowVersion {
				t.Fatalf("%s: version %+v after %+v, want the same id and a higher version", name, v, last)
			}
			last = v
		}
		step("an edit", func() error {
			_, err := st.UpdateNode(ctx, u, func(n *proto.Node) error { n.Extra = proto.Dict{"k": "v"}; return nil })
			return err
		})
		step("a state change", func() error {
			_, err := st.UpdateNode(ctx, u, func(n *proto.Node) error { n.ProvisionState = proto.StateInspectWait; return nil })
			return err
		})
		step("a reservation", func() error { _, err := st.Reserve(ctx, u, "c1"); return err })
		step("a release", func() error { return st.Release(ctx, u, "c1") })
		step("a reservation by a dead conductor released", func() error {
			if _, err := st.Reserve(ctx, u, "gone"); err != nil {
				return err
			}
			before := versionOf(t, st, u)
			if before.RowVersion <= last.RowVersion {
				return fmt.Errorf("the reservation left version %d", before.RowVersion)
			}
			last = before
			released, err := st.ReleaseDead(ctx)
			if err != nil || len(released) != 1 {
				return fmt.Errorf("ReleaseDead = %v, %v", released, err)
			}
			return nil
		})
		if _, err := st.UpdateNode(ctx, u, func(n *proto.Node) error { n.ProvisionState = proto.StateDeployWait; return nil }); err != nil {
			t.Fatal(err)
		}
		last = versionOf(t, st, u)
		step("an agent's heartbeat", func() error {
			seen, err := st.AgentOf(ctx, u)
			if err != nil {
				return err
			}
			ok, err := st.RecordAgent(ctx, seen, []KeyValue{{Key: proto.InfoAgentURL, Value: "http://10.0.0.5:9999"}}, true)
			if err == nil && !ok {
				err = fmt.Errorf("not recorded")
			}
			return err
		})

		vv, _ := VersionedViewsOf(st)
		if err := st.DeleteNode(ctx, uuids[1]); err != nil {
			t.Fatal(err)
		}
		other := versionOf(t, st, uuids[2])
		// 300 ids: more than one query's batch, the missing id and the
		// repeats read once.
		ids := []int64{last.ID, other.ID, last.ID + 1_000_000}
		for range 297 {
			ids = append(ids, other.ID)
		}
		got, err := vv.NodeViewsByID(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		byUUID := map[string]VersionedView{}
		for _, v := range got {
			byUUID[v.UUID] = v
		}
		if len(byUUID) != 2 || byUUID[u].NodeVersion != last || byUUID[uuids[2]].NodeVersion != other {
			t.Fatalf("NodeViewsByID read %+v, want %s at %+v and %s at %+v", byUUID, u, last, uuids[2], other)
		}
		if v := byUUID[u]; v.ProvisionState != proto.StateDeployWait || !strings.Contains(string(v.Doc), "10.0.0.5") ||
			strings.Contains(string(v.Doc), `"pw"`) || strings.Contains(string(v.Doc), `"tok"`) {
			t.Fatalf("the view read by id: %s %s", v.ProvisionState, v.Doc)
		}

		if ss := st.(*sqlStore); ss.d.name == "sqlite" {
			_, err := ss.wdb.ExecContext(ctx, "UPDATE nodes SET reservation = 'x' WHERE uuid = ?", u)
			if err == nil || !strings.Contains(err.Error(), rowVersionNotBumped) {
				t.Fatalf("an UPDATE without the bump: %v, want the guard's refusal", err)
			}
		}
	})
}

// TestNodeVersionsInListOrder: ListNodeVersions lists the nodes ListNodeViews
// lists, in the same order, for every sort key, both directions, with and
// without a marker, a limit and a filter, on both databases.
func TestNodeVersionsInListOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		states := []proto.ProvisionState{proto.StateActive, proto.StateAvailable, proto.StateManageable}
		for i := range 12 {
			name := fmt.Sprintf("n-%d", (i*7)%12)
			n := &proto.Node{UUID: fmt.Sprintf("7b000000-0000-4000-8000-%012d", (i*5)%12), Name: &name,
				Driver: []string{"ipmi", "redfish"}[i%2], ProvisionState: states[i%3], Maintenance: i%4 == 0}
			if i%3 > 0 {
				owner := []string{"", "a", "b"}[i%3]
				n.Owner = &owner
			}
			if i == 3 {
				n.Name = nil
			}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			if i%5 == 0 {
				if _, err := st.Reserve(ctx, n.UUID, fmt.Sprintf("c%d", i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		ss := st.(*sqlStore)
		yes := true
		for _, key := range append([]string{""}, NodeSortKeys...) {
			for _, dir := range []string{"", "desc"} {
				for _, q := range []NodeQuery{{}, {Limit: 5}, {Limit: 5, Maintenance: &yes}, {Driver: "ipmi"}} {
					q.SortKey, q.SortDir = key, dir
					all, err := ss.ListNodeViews(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					markers := []string{""}
					if len(all) > 2 {
						markers = append(markers, all[1].UUID)
					}
					for _, marker := range markers {
						q.Marker = marker
						views, err := ss.ListNodeViews(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						vers, err := ss.ListNodeVersions(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						ids := make([]int64, len(vers))
						for i, v := range vers {
							ids[i] = v.ID
						}
						read, err := ss.NodeViewsByID(ctx, ids)
						if err != nil {
							t.Fatal(err)
						}
						uuidOf := map[int64]string{}
						for _, v := range read {
							uuidOf[v.ID] = v.UUID
						}
						var got, want []string
						for _, v := range vers {
							got = append(got, uuidOf[v.ID])
						}
						for _, v := range views {
							want = append(want, v.UUID)
						}
						if strings.Join(got, " ") != strings.Join(want, " ") {
							t.Errorf("%+v: versions in order\n %v\nviews\n %v", q, got, want)
						}
					}
				}
			}
		}
	})
}
