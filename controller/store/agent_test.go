package store

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

func TestAgentOfAndRecordAgent(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		st := openT(t, dsn, Options{Now: clock.Now})
		name := "agent-node"
		n := &proto.Node{UUID: "3b0c5f0e-1a2b-4c3d-8e9f-0a1b2c3d4e5f", Name: &name, Driver: "fake-hardware",
			ProvisionState: proto.StateDeployWait, Properties: proto.Dict{"cpus": 4},
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok", "deploy_steps": []any{"a"}}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AgentOf(ctx, "no-such-node"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("AgentOf(unknown) = %v, want ErrNotFound", err)
		}
		v, err := st.AgentOf(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if v.UUID != n.UUID || v.ProvisionState != proto.StateDeployWait || v.Maintenance || v.Reservation != nil ||
			v.Token != "tok" || v.URL != "" || v.HasURL {
			t.Fatalf("AgentOf = %+v", v)
		}

		clock.Advance(time.Minute)
		set := []KeyValue{{proto.InfoAgentURL, "http://10.0.0.5:9999"}, {proto.InfoAgentVersion, "10.1"}}
		ok, err := st.RecordAgent(ctx, v, set, true)
		if err != nil || !ok {
			t.Fatalf("RecordAgent = %v, %v; want applied", ok, err)
		}
		got, err := st.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got.DriverInternalInfo[proto.InfoAgentURL] != "http://10.0.0.5:9999" || got.DriverInternalInfo[proto.InfoAgentVersion] != "10.1" ||
			got.DriverInternalInfo[proto.InfoAgentToken] != "tok" || got.Properties["cpus"] != float64(4) {
			t.Errorf("after RecordAgent: driver_internal_info %v properties %v", got.DriverInternalInfo, got.Properties)
		}
		want := wireTime(clock.Now())
		if got.UpdatedAt == nil || !got.UpdatedAt.Equal(want.Time) || got.ProvisionUpdatedAt == nil || !got.ProvisionUpdatedAt.Equal(want.Time) {
			t.Errorf("updated_at %v, provision_updated_at %v; want %v", got.UpdatedAt, got.ProvisionUpdatedAt, want)
		}
		// The columns are kept in step with the document.
		ss := st.(*sqlStore)
		var upd, prov int64
		if err := ss.queryRow(ctx, ss.rdb, "SELECT updated_at, provision_updated_at FROM nodes WHERE uuid = ?", n.UUID).Scan(&upd, &prov); err != nil {
			t.Fatal(err)
		}
		if upd != want.UnixMicro() || prov != want.UnixMicro() {
			t.Errorf("columns updated_at %d provision_updated_at %d, want %d", upd, prov, want.UnixMicro())
		}

		// A view that is no longer true — the URL is now set, the state
		// moves on, a conductor reserves it — writes nothing.
		before, _ := st.GetNode(ctx, n.UUID)
		if ok, err := st.RecordAgent(ctx, v, []KeyValue{{proto.InfoAgentVersion, "stale"}}, false); err != nil || ok {
			t.Errorf("RecordAgent with a stale agent URL = %v, %v; want not applied", ok, err)
		}
		v2, _ := st.AgentOf(ctx, n.UUID)
		if !v2.HasURL || v2.URL != "http://10.0.0.5:9999" {
			t.Fatalf("AgentOf after record = %+v", v2)
		}
		if _, err := st.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.ProvisionState = proto.StateDeploying; return nil }); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RecordAgent(ctx, v2, []KeyValue{{proto.InfoAgentVersion, "stale"}}, false); err != nil || ok {
			t.Errorf("RecordAgent after a state change = %v, %v; want not applied", ok, err)
		}
		v3, _ := st.AgentOf(ctx, n.UUID)
		if err := st.RegisterConductor(ctx, Conductor{Hostname: "c1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Reserve(ctx, n.UUID, "c1"); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RecordAgent(ctx, v3, []KeyValue{{proto.InfoAgentVersion, "stale"}}, false); err != nil || ok {
			t.Errorf("RecordAgent after a reservation = %v, %v; want not applied", ok, err)
		}
		after, _ := st.GetNode(ctx, n.UUID)
		if after.DriverInternalInfo[proto.InfoAgentVersion] != before.DriverInternalInfo[proto.InfoAgentVersion] {
			t.Errorf("a refused RecordAgent wrote agent_version %v", after.DriverInternalInfo[proto.InfoAgentVersion])
		}
		v4, _ := st.AgentOf(ctx, n.UUID)
		if v4.Reservation == nil || *v4.Reservation != "c1" || v4.ProvisionState != proto.StateDeploying {
			t.Errorf("AgentOf of a reserved node = %+v", v4)
		}
		if ok, err := st.RecordAgent(ctx, AgentView{UUID: n.UUID}, nil, false); err == nil || ok {
			t.Errorf("RecordAgent of a view AgentOf did not read = %v, %v", ok, err)
		}
	})
}

// RecordAgent prepares its UPDATE on SQLite's single writer connection
// outside any transaction: one that waits for a transaction holding the
// writer proceeds once it ends (preparing inside would wait for itself),
// and later heartbeats reuse the statement.
func TestRecordAgentPreparedBehindBusyWriter(t *testing.T) {
	ctx := context.Background()
	st := openT(t, "sqlite://"+t.TempDir()+"/kiln.db", Options{})
	ss := st.(*sqlStore)
	if ss.wstmts == nil {
		t.Fatal("the SQLite store keeps no write statements")
	}
	n := &proto.Node{UUID: "5a0c5f0e-1a2b-4c3d-8e9f-0a1b2c3d4e5f", Driver: "fake-hardware",
		ProvisionState: proto.StateDeployWait, DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- ss.writeTx(ctx, func(*sql.Tx) error { close(holding); <-release; return nil })
	}()
	<-holding
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := st.AgentOf(ctx, n.UUID)
		if err != nil {
			done <- result{false, err}
			return
		}
		ok, err := st.RecordAgent(ctx, v, []KeyValue{{proto.InfoAgentURL, "http://10.0.0.7:9999"}}, false)
		done <- result{ok, err}
	}()
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || !r.ok {
		t.Fatalf("RecordAgent behind a busy writer = %v, %v; want applied", r.ok, r.err)
	}
	v, err := st.AgentOf(ctx, n.UUID)
	if err != nil || v.URL != "http://10.0.0.7:9999" {
		t.Fatalf("AgentOf after the record = %+v, %v", v, err)
	}
	if ok, err := st.RecordAgent(ctx, v, []KeyValue{{proto.InfoAgentURL, "http://10.0.0.7:9999"}}, false); err != nil || !ok {
		t.Fatalf("second RecordAgent = %v, %v", ok, err)
	}
	ss.wstmts.mu.RLock()
	kept := len(ss.wstmts.stmts)
	ss.wstmts.mu.RUnlock()
	// The two views differ (no URL, then one): two statements, each kept once.
	if kept != 2 {
		t.Errorf("%d write statements kept, want 2 (one per shape of the UPDATE)", kept)
	}
}
