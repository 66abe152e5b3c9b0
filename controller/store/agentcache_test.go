package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// kept reports whether v was served from the kept views (agentcache.go)
// rather than read in full: kept views carry no document.
func kept(v AgentView) bool { return v.doc == "" }

// TestKeptAgentViewFollowsTheRow: a heartbeat on an unchanged node is
// served from the kept view, and every change of the row, by this store or
// by another controller's on the same database, is seen at once.
func TestKeptAgentViewFollowsTheRow(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		st := openT(t, dsn, Options{Now: clock.Now})
		other := openT(t, dsn, Options{Now: clock.Now}) // a second controller
		n := &proto.Node{UUID: "6f1f2d1c-0b7a-4c55-9d0e-1c2b3a4d5e6f", Driver: "fake-hardware",
			ProvisionState: proto.StateDeployWait, Maintenance: true,
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok-1", proto.InfoAgentURL: "http://10.0.0.5:9999",
				proto.InfoAgentVersion: "10.1", proto.InfoAgentLastHeartbeat: "2026-01-02T03:04:05.000000"}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		agentOf := func(s Store) AgentView {
			t.Helper()
			v, err := s.AgentOf(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		first := agentOf(st)
		if kept(first) {
			t.Fatal("the first read of a node was served from kept views")
		}
		second := agentOf(st)
		if !kept(second) {
			t.Fatal("an unchanged node was read in full again")
		}
		first.doc, first.masked = "", nil
		if fmt.Sprint(first) != fmt.Sprint(second) {
			t.Fatalf("kept view %+v, read in full %+v", second, first)
		}

		// A narrow stamp does not change the row: the kept view serves it
		// with the new last heartbeat.
		at := clock.Now().Add(time.Hour).Truncate(time.Microsecond)
		if ok, err := st.RecordSeen(ctx, second, at); err != nil || !ok {
			t.Fatalf("RecordSeen = %v, %v", ok, err)
		}
		v := agentOf(st)
		if !kept(v) || !v.LastHeartbeat.Equal(at) {
			t.Fatalf("after a stamp: kept %v, last heartbeat %v, want %v", kept(v), v.LastHeartbeat, at)
		}

		// Another controller changes the token: the next read sees it.
		if _, err := other.UpdateNode(ctx, n.UUID, func(n *proto.Node) error {
			n.DriverInternalInfo[proto.InfoAgentToken] = "tok-2"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		v = agentOf(st)
		if kept(v) || v.Token != "tok-2" {
			t.Fatalf("after another controller's change: kept %v, token %q", kept(v), v.Token)
		}
		// A stale kept view is refused by both writes.
		if ok, err := st.RecordSeen(ctx, second, at.Add(time.Second)); err != nil || ok {
			t.Errorf("RecordSeen with a stale kept view = %v, %v; want not applied", ok, err)
		}
		if ok, err := st.RecordAgent(ctx, second, []KeyValue{{proto.InfoAgentVersion, "stale"}}, false); err != nil || ok {
			t.Errorf("RecordAgent with a stale kept view = %v, %v; want not applied", ok, err)
		}

		// RecordAgent from a kept view writes what it would from a full
		// one, and the next read is a full one.
		v = agentOf(st)
		if !kept(v) {
			t.Fatal("an unchanged node was read in full again")
		}
		clock.Advance(time.Minute)
		if ok, err := st.RecordAgent(ctx, v, []KeyValue{{proto.InfoAgentURL, "http://10.0.0.5:9999"}, {proto.InfoAgentVersion, "10.2"}}, false); err != nil || !ok {
			t.Fatalf("RecordAgent from a kept view = %v, %v; want applied", ok, err)
		}
		if st.(*sqlStore).agents.has(n.UUID) {
			t.Error("the view is still kept after this store's own write of the row: the next heartbeat probes in vain")
		}
		got, err := st.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got.DriverInternalInfo[proto.InfoAgentVersion] != "10.2" || got.DriverInternalInfo[proto.InfoAgentToken] != "tok-2" {
			t.Errorf("after RecordAgent from a kept view: %v", got.DriverInternalInfo)
		}
		if v = agentOf(st); kept(v) || v.Version != "10.2" {
			t.Errorf("after this store's own write: kept %v, version %q", kept(v), v.Version)
		}

		// The node is deleted and enrolled again under the same UUID: a
		// new row, whose view is read in full.
		agentOf(st)
		if !kept(agentOf(st)) {
			t.Fatal("an unchanged node was read in full again")
		}
		if err := other.DeleteNode(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AgentOf(ctx, n.UUID); err == nil {
			t.Fatal("AgentOf of a deleted node succeeded")
		}
		n2 := &proto.Node{UUID: n.UUID, Driver: "fake-hardware", ProvisionState: proto.StateDeployWait,
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok-3"}}
		if err := other.CreateNode(ctx, n2); err != nil {
			t.Fatal(err)
		}
		if v = agentOf(st); kept(v) || v.Token != "tok-3" || v.HasURL || v.Maintenance {
			t.Fatalf("after the node was enrolled again: kept %v, %+v", kept(v), v)
		}
	})
}

// TestKeptAgentViewsAreBounded: past the limit, views are dropped, never
// served wrong.
func TestKeptAgentViewsAreBounded(t *testing.T) {
	ctx := context.Background()
	st := openT(t, "sqlite://"+t.TempDir()+"/kiln.db", Options{}).(*sqlStore)
	st.agents.limit = 3
	var uuids []string
	for i := range 5 {
		u := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		uuids = append(uuids, u)
		if err := st.CreateNode(ctx, &proto.Node{UUID: u, Driver: "fake-hardware", ProvisionState: proto.StateDeployWait,
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok-" + u}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AgentOf(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if len(st.agents.m) != 3 {
		t.Fatalf("%d views kept, limit 3", len(st.agents.m))
	}
	// Which views survive is random; that each read is right, that the
	// view just read is served next, and the bound are not.
	for _, u := range uuids {
		for i := range 2 {
			v, err := st.AgentOf(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if v.Token != "tok-"+u || v.UUID != u {
				t.Errorf("AgentOf(%s) = token %q uuid %s", u, v.Token, v.UUID)
			}
			if i == 1 && v.doc != "" {
				t.Errorf("AgentOf(%s) read again at once was not served from its kept view", u)
			}
		}
		if n := len(st.agents.m); n > 3 {
			t.Fatalf("%d views kept, limit 3", n)
		}
	}
}

// TestAgentProbeReadsNoRow: the probe of a kept view is answered from the
// index alone on SQLite.
func TestAgentProbeReadsNoRow(t *testing.T) {
	st := openT(t, "sqlite://"+t.TempDir()+"/kiln.db", Options{}).(*sqlStore)
	plan := explainSQLite(t, st, st.d.rebind(st.d.agentProbeQuery()), []any{"x"})
	if !strings.Contains(plan, "COVERING INDEX nodes_uuid_version") {
		t.Errorf("the probe reads the row:\n%s", plan)
	}
}
