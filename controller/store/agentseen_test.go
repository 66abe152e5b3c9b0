package store

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// TestRecordSeenMergedOnRead: a narrow stamp (RecordSeen) leaves the node
// row as it was (row version, documents) and yet every read of the node
// shows it as driver_internal_info.agent_last_heartbeat — AgentOf, GetNode,
// ListNodes, Reserve, UpdateNode's function, the API's views and their
// versions — and the conductor's scan runs the heartbeat timeout from it.
// An older stamp never replaces a newer one; a view read before the node
// changed records nothing; a document whose stamp was removed does not get
// it back; deleting the node deletes its stamp.
func TestRecordSeenMergedOnRead(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock, st, n := nodeAwaitingAgent(t, dsn, "5d0c5f0e-1a2b-4c3d-8e9f-0a1b2c3d4e5f", proto.StateDeployWait)
		ss := st.(*sqlStore)
		// The first heartbeat is written into the document.
		t0 := clock.Now().Truncate(time.Microsecond)
		v, err := st.AgentOf(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		set := []KeyValue{{proto.InfoAgentURL, "http://10.0.0.5:9999"}, {proto.InfoAgentVersion, "10.1"},
			{proto.InfoAgentLastHeartbeat, t0.UTC().Format(time.RFC3339Nano)}}
		if ok, err := st.RecordAgent(ctx, v, set, false); err != nil || !ok {
			t.Fatalf("RecordAgent = %v, %v", ok, err)
		}
		type rowState struct {
			version int64
			doc     string
		}
		row := func() rowState {
			t.Helper()
			var r rowState
			if err := ss.queryRow(ctx, ss.rdb, "SELECT row_version, doc FROM nodes WHERE uuid = ?", n.UUID).Scan(&r.version, &r.doc); err != nil {
				t.Fatal(err)
			}
			return r
		}
		before := row()

		// A later heartbeat is a narrow stamp.
		clock.Advance(25 * time.Second)
		t1 := clock.Now().Add(-time.Millisecond).Truncate(time.Microsecond)
		if v, err = st.AgentOf(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RecordSeen(ctx, v, t1); err != nil || !ok {
			t.Fatalf("RecordSeen = %v, %v", ok, err)
		}
		if after := row(); after != before {
			t.Errorf("RecordSeen changed the node row: version %d → %d, document changed %v", before.version, after.version, after.doc != before.doc)
		}
		// An older stamp (another controller's, late) keeps the newer one.
		if ok, err := st.RecordSeen(ctx, v, t1.Add(-time.Second)); err != nil || !ok {
			t.Fatalf("RecordSeen(older) = %v, %v", ok, err)
		}
		want := t1.UTC().Format(time.RFC3339Nano)
		checkReads(t, st, n.UUID, t1, want)

		// The scan: the timeout runs from the narrow stamp.
		const timeout = time.Minute
		scan := func(now time.Time) bool {
			t.Helper()
			got, err := st.NodesWithWork(ctx, WorkQuery{HeartbeatBefore: now.Add(-timeout)})
			if err != nil {
				t.Fatal(err)
			}
			return slices.Contains(got, n.UUID)
		}
		if scan(t0.Add(timeout + time.Microsecond)) {
			t.Errorf("the scan finds the node past the written heartbeat's timeout, though the narrow stamp is recent")
		}
		if scan(t1.Add(timeout)) {
			t.Errorf("the scan finds the node at the narrow stamp's timeout end, not past it")
		}
		if !scan(t1.Add(timeout + time.Microsecond)) {
			t.Errorf("the scan misses the node past the narrow stamp's timeout")
		}

		// A view read before the node changed records nothing.
		stale := v
		if _, err := st.UpdateNode(ctx, n.UUID, func(m *proto.Node) error {
			if got := m.DriverInternalInfo[proto.InfoAgentLastHeartbeat]; got != want {
				t.Errorf("UpdateNode's function sees agent_last_heartbeat %v, want %s", got, want)
			}
			m.Extra = proto.Dict{"k": "v"}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RecordSeen(ctx, stale, t1.Add(time.Second)); err != nil || ok {
			t.Fatalf("RecordSeen(stale view) = %v, %v; want not applied", ok, err)
		}
		checkReads(t, st, n.UUID, t1, want)

		// Reserve's node is merged.
		clock.Advance(time.Second)
		if v, err = st.AgentOf(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		t2 := clock.Now().Truncate(time.Microsecond)
		if ok, err := st.RecordSeen(ctx, v, t2); err != nil || !ok {
			t.Fatalf("RecordSeen = %v, %v", ok, err)
		}
		want2 := t2.UTC().Format(time.RFC3339Nano)
		r, err := st.Reserve(ctx, n.UUID, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if got := r.DriverInternalInfo[proto.InfoAgentLastHeartbeat]; got != want2 {
			t.Errorf("Reserve: agent_last_heartbeat %v, want %s", got, want2)
		}
		if err := st.Release(ctx, n.UUID, "c1"); err != nil {
			t.Fatal(err)
		}

		// A new wait that clears the stamp does not get the old one back.
		if _, err := st.UpdateNode(ctx, n.UUID, func(m *proto.Node) error {
			delete(m.DriverInternalInfo, proto.InfoAgentLastHeartbeat)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if hb, ok := got.DriverInternalInfo[proto.InfoAgentLastHeartbeat]; ok {
			t.Errorf("a cleared agent_last_heartbeat came back: %v", hb)
		}
		if v, err := st.AgentOf(ctx, n.UUID); err != nil || !v.LastHeartbeat.IsZero() {
			t.Errorf("AgentOf after clearing: last heartbeat %v, %v; want none", v.LastHeartbeat, err)
		}
		view, err := ss.GetNodeView(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(view.Doc), proto.InfoAgentLastHeartbeat) {
			t.Errorf("a cleared agent_last_heartbeat came back in the view: %s", view.Doc)
		}

		// Deleting the node deletes its stamp.
		if err := st.DeleteNode(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		var count int
		if err := ss.queryRow(ctx, ss.rdb, "SELECT COUNT(*) FROM node_agent_seen").Scan(&count); err != nil || count != 0 {
			t.Errorf("stamps left after the node's deletion: %d, %v", count, err)
		}
	})
}

// checkReads checks that every read of node uuid shows the agent's last
// heartbeat at (text want).
func checkReads(t *testing.T, st Store, uuid string, at time.Time, want string) {
	t.Helper()
	ctx := context.Background()
	ss := st.(*sqlStore)
	v, err := st.AgentOf(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	if !v.LastHeartbeat.Equal(at) {
		t.Errorf("AgentOf: last heartbeat %v, want %v", v.LastHeartbeat, at)
	}
	n, err := st.GetNode(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.DriverInternalInfo[proto.InfoAgentLastHeartbeat]; got != want {
		t.Errorf("GetNode: agent_last_heartbeat %v, want %s", got, want)
	}
	list, err := st.ListNodes(ctx, NodeQuery{})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListNodes = %d nodes, %v", len(list), err)
	}
	if got := list[0].DriverInternalInfo[proto.InfoAgentLastHeartbeat]; got != want {
		t.Errorf("ListNodes: agent_last_heartbeat %v, want %s", got, want)
	}
	quoted := `"` + proto.InfoAgentLastHeartbeat + `":"` + want + `"`
	view, err := ss.GetNodeView(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(view.Doc), quoted) {
		t.Errorf("GetNodeView lacks %s: %s", quoted, view.Doc)
	}
	views, err := ss.ListNodeViews(ctx, NodeQuery{})
	if err != nil || len(views) != 1 || !strings.Contains(string(views[0].Doc), quoted) {
		t.Errorf("ListNodeViews lacks %s: %v", quoted, err)
	}
	vers, err := ss.ListNodeVersions(ctx, NodeQuery{})
	var rowVersion int64
	if err := ss.queryRow(ctx, ss.rdb, "SELECT row_version FROM nodes WHERE uuid = ?", uuid).Scan(&rowVersion); err != nil {
		t.Fatal(err)
	}
	if err != nil || len(vers) != 1 || vers[0].RowVersion != rowVersion+at.UnixMicro() {
		t.Fatalf("ListNodeVersions = %+v, %v; want row version %d plus the stamp %d", vers, err, rowVersion, at.UnixMicro())
	}
	byID, err := ss.NodeViewsByID(ctx, []int64{vers[0].ID})
	if err != nil || len(byID) != 1 || byID[0].NodeVersion != vers[0] || !strings.Contains(string(byID[0].Doc), quoted) {
		t.Errorf("NodeViewsByID = %+v, %v; want version %+v with %s", byID, err, vers[0], quoted)
	}
}

// TestMergeSeenDoc: a narrow stamp replaces an older agent_last_heartbeat
// of a stored (compact) or masked (lined) document, and nothing else.
func TestMergeSeenDoc(t *testing.T) {
	at := time.Date(2026, 12, 2, 8, 0, 0, 123456000, time.UTC)
	seen := sql.NullInt64{Int64: at.UnixMicro(), Valid: true}
	newer := `"2026-12-02T08:00:00.123456Z"`
	for _, tc := range []struct {
		name  string
		doc   string
		lined bool
		seen  sql.NullInt64
		want  string
	}{
		{"older stamp", `{"a":1,"driver_internal_info":{"agent_last_heartbeat":"2026-12-02T07:59:00Z","x":2},"b":3}`, false, seen,
			`{"a":1,"driver_internal_info":{"agent_last_heartbeat":` + newer + `,"x":2},"b":3}`},
		{"older stamp, lined", "{\n\"driver_internal_info\":{\"agent_last_heartbeat\":\"2026-12-02T07:59:00Z\"},\n\"b\":3}", true, seen,
			"{\n\"driver_internal_info\":{\"agent_last_heartbeat\":" + newer + "},\n\"b\":3}"},
		{"Ironic's layout, older", `{"driver_internal_info":{"agent_last_heartbeat":"2026-12-02T07:59:00.000000+00:00"}}`, false, seen,
			`{"driver_internal_info":{"agent_last_heartbeat":` + newer + `}}`},
		{"newer stamp kept", `{"driver_internal_info":{"agent_last_heartbeat":"2026-12-02T08:00:01Z"}}`, false, seen,
			`{"driver_internal_info":{"agent_last_heartbeat":"2026-12-02T08:00:01Z"}}`},
		{"same stamp kept", `{"driver_internal_info":{"agent_last_heartbeat":` + newer + `}}`, false, seen,
			`{"driver_internal_info":{"agent_last_heartbeat":` + newer + `}}`},
		{"no stamp: none added", `{"driver_internal_info":{"x":1}}`, false, seen, `{"driver_internal_info":{"x":1}}`},
		{"no driver_internal_info", `{"a":1}`, false, seen, `{"a":1}`},
		{"null stamp: kept", `{"driver_internal_info":{"agent_last_heartbeat":null}}`, false, seen, `{"driver_internal_info":{"agent_last_heartbeat":null}}`},
		{"no narrow stamp", `{"driver_internal_info":{"agent_last_heartbeat":"2026-12-02T07:59:00Z"}}`, false, sql.NullInt64{},
			`{"driver_internal_info":{"agent_last_heartbeat":"2026-12-02T07:59:00Z"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mergeSeenDoc([]byte(tc.doc), tc.lined, tc.seen)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("mergeSeenDoc =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
