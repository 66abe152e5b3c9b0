package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// workColumns reads a node's work columns as stored.
func workColumns(t *testing.T, st Store, uuid string) (now sql.NullBool, hb, since sql.NullInt64) {
	t.Helper()
	s := st.(*sqlStore)
	if err := s.queryRow(context.Background(), s.rdb, "SELECT work_now, wait_heartbeat, wait_since FROM nodes WHERE uuid = ?", uuid).
		Scan(&now, &hb, &since); err != nil {
		t.Fatal(err)
	}
	return now, hb, since
}

// TestNodesWithWork: the scan's query selects exactly the free nodes of
// the group with work now or a wait older than the conductor's timeouts,
// and a heartbeat written by RecordAgent moves a node as UpdateNode would.
func TestNodesWithWork(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		st := openT(t, dsn, Options{Now: clock.Now})
		t0 := clock.Now()
		mk := func(i int, state proto.ProvisionState, edit func(n *proto.Node)) string {
			n := &proto.Node{UUID: fmt.Sprintf("c0000000-0000-4000-8000-%012d", i), Driver: "fake-hardware", ProvisionState: state,
				DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}, ProvisionUpdatedAt: &proto.Time{Time: t0}}
			if edit != nil {
				edit(n)
			}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			return n.UUID
		}
		heartbeat := func(at time.Time) func(n *proto.Node) {
			return func(n *proto.Node) {
				flowstate.Update(n, func(s *flowstate.State) { s.Agent.LastHeartbeat = at })
			}
		}
		idle := mk(1, proto.StateActive, nil)
		power := mk(2, proto.StateActive, func(n *proto.Node) { n.TargetPowerState = ptrTo(proto.PowerOff) })
		heard := mk(3, proto.StateDeployWait, heartbeat(t0.Add(time.Minute)))
		waiting := mk(4, proto.StateCleanWait, nil)
		mk(5, proto.StateCleanWait, func(n *proto.Node) { n.Maintenance = true })
		reserved := mk(6, proto.StateActive, func(n *proto.Node) { n.TargetPowerState = ptrTo(proto.PowerOn) })
		mk(7, proto.StateActive, func(n *proto.Node) { n.TargetPowerState = ptrTo(proto.PowerOn); n.ConductorGroup = "rack2" })
		interrupted := mk(8, proto.StateDeploying, nil)
		if _, err := st.Reserve(ctx, reserved, "c1"); err != nil {
			t.Fatal(err)
		}
		sel := func(hb, wait time.Time) []string {
			t.Helper()
			got, err := st.NodesWithWork(ctx, WorkQuery{HeartbeatBefore: hb, WaitBefore: wait})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			return got
		}
		var zero time.Time
		for _, tc := range []struct {
			name     string
			hb, wait time.Time
			want     []string
		}{
			{"no wait has expired", t0, t0, []string{power, interrupted}},
			{"no kind of wait asked for", zero, zero, []string{power, interrupted}},
			{"the heartbeat timeout has passed", t0.Add(2 * time.Minute), t0, []string{power, heard, interrupted}},
			{"the call-back timeout has passed", t0, t0.Add(time.Second), []string{power, waiting, interrupted}},
			{"both", t0.Add(2 * time.Minute), t0.Add(time.Second), []string{power, heard, waiting, interrupted}},
		} {
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if got := sel(tc.hb, tc.wait); !slices.Equal(got, want) {
				t.Errorf("%s: NodesWithWork = %v, want %v", tc.name, got, want)
			}
		}
		if got, err := st.NodesWithWork(ctx, WorkQuery{ConductorGroup: "rack2"}); err != nil || len(got) != 1 {
			t.Errorf("group rack2: %v, %v; want its one node", got, err)
		}
		if now, _, _ := workColumns(t, st, idle); !now.Valid || now.Bool {
			t.Errorf("idle node: work_now %v, want false", now)
		}

		// A heartbeat on the fast path: the waiting node now has a heartbeat
		// to act on, and its wait runs from the heartbeat.
		v, err := st.AgentOf(ctx, waiting)
		if err != nil {
			t.Fatal(err)
		}
		at := t0.Add(time.Hour)
		stamp := at.UTC().Format(time.RFC3339Nano)
		ok, err := st.RecordAgent(ctx, v, []KeyValue{{proto.InfoAgentURL, "http://10.0.0.9:9999"},
			{proto.InfoAgentLastHeartbeat, stamp}, {proto.InfoHeartbeatPending, stamp}}, true)
		if err != nil || !ok {
			t.Fatalf("RecordAgent = %v, %v", ok, err)
		}
		now, hb, since := workColumns(t, st, waiting)
		if !now.Bool || !hb.Valid || hb.Int64 != at.UnixMicro() || since.Valid {
			t.Errorf("after a heartbeat: work_now %v wait_heartbeat %v wait_since %v; want true, %d, NULL", now, hb, since, at.UnixMicro())
		}
		// The fast path wrote what the document says (nodeValues would).
		n, err := st.UpdateNode(ctx, waiting, func(*proto.Node) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if now2, hb2, since2 := workColumns(t, st, n.UUID); now2 != now || hb2 != hb || since2 != since {
			t.Errorf("derived from the document: %v %v %v; the fast path wrote %v %v %v", now2, hb2, since2, now, hb, since)
		}
		// Acting on it clears the work.
		if _, err := st.UpdateNode(ctx, waiting, func(n *proto.Node) error {
			flowstate.Update(n, func(s *flowstate.State) { s.HeartbeatPending = time.Time{} })
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if now, _, _ := workColumns(t, st, waiting); now.Bool {
			t.Error("work_now stays set after the heartbeat was acted on")
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

// TestMigration33DerivesWork: nodes stored before migration 0033 get their
// work columns when the store opens, so the first scan sees their work.
func TestMigration33DerivesWork(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		d, db := migratedBefore(t, ctx, dsn, "0033_")
		const busy, idle = "d0000000-0000-4000-8000-000000000001", "d0000000-0000-4000-8000-000000000002"
		for _, n := range []struct{ uuid, state, doc string }{
			{busy, "active", `{"uuid":"` + busy + `","driver":"fake-hardware","provision_state":"active","target_power_state":"power off"}`},
			{idle, "active", `{"uuid":"` + idle + `","driver":"fake-hardware","provision_state":"active"}`},
		} {
			if _, err := db.ExecContext(ctx, d.rebind("INSERT INTO nodes (uuid, driver, provision_state, doc) VALUES (?, ?, ?, ?)"),
				n.uuid, "fake-hardware", n.state, n.doc); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()

		st := openT(t, dsn, Options{})
		if got, err := st.NodesWithWork(ctx, WorkQuery{}); err != nil || !slices.Equal(got, []string{busy}) {
			t.Errorf("NodesWithWork after 0033 = %v, %v; want [%s]", got, err, busy)
		}
		for _, u := range []string{busy, idle} {
			if now, _, _ := workColumns(t, st, u); !now.Valid {
				t.Errorf("node %s: work_now not derived", u)
			}
		}
	})
}

// TestNodesWithWorkIsIndexed: the scan's query seeks each kind of work in
// its partial index; it never reads the whole nodes table.
func TestNodesWithWorkIsIndexed(t *testing.T) {
	st := openT(t, "sqlite://"+t.TempDir()+"/k.db", Options{}).(*sqlStore)
	plan := explainSQLite(t, st, nodesWithWorkQuery, []any{"", "", int64(1), int64(1), "", int64(1)})
	for _, idx := range []string{"nodes_work_now", "nodes_wait_heartbeat", "nodes_wait_since"} {
		if !strings.Contains(plan, idx) {
			t.Errorf("the plan does not use %s:\n%s", idx, plan)
		}
	}
	for _, line := range strings.Split(plan, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "SCAN nodes") {
			t.Errorf("the plan scans the nodes table:\n%s", plan)
		}
	}
}
