package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// TestAgentOfReadsRecordedHeartbeat: what a heartbeat recorded — the
// agent's version, CA and last heartbeat, which the API compares a new
// heartbeat with to decide whether to write — reads back through AgentOf
// after each write (PostgreSQL's jsonb text after a jsonb_set included),
// and the conductor's scan finds the node once the heartbeat timeout has
// passed since the recorded heartbeat, and not before: a heartbeat the API
// does not write leaves the recorded one, so the timeout runs from it.
// nodeAwaitingAgent opens a store on dsn with a fake clock and creates a
// node in state whose agent has its token and has not heartbeated yet.
func nodeAwaitingAgent(t *testing.T, dsn, uuid string, state proto.ProvisionState) (*fakeClock, Store, *proto.Node) {
	t.Helper()
	clock := newFakeClock()
	st := openT(t, dsn, Options{Now: clock.Now})
	n := &proto.Node{UUID: uuid, Driver: "fake-hardware",
		ProvisionState: state, DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}}
	if err := st.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return clock, st, n
}

func TestAgentOfReadsRecordedHeartbeat(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock, st, n := nodeAwaitingAgent(t, dsn, "7c0c5f0e-1a2b-4c3d-8e9f-0a1b2c3d4e5f", proto.StateInspectWait)
		const timeout = time.Minute
		scan := func(now time.Time) bool {
			t.Helper()
			got, err := st.NodesWithWork(ctx, WorkQuery{HeartbeatBefore: now.Add(-timeout)})
			if err != nil {
				t.Fatal(err)
			}
			return slices.Contains(got, n.UUID)
		}
		for i, tc := range []struct {
			version, ca string
			touch       bool // the first two add keys with json_set, the last splices
		}{
			{"10.1", "", true},
			{"10.1", "PEM", false},
			{"10.2", "PEM", false},
		} {
			clock.Advance(time.Duration(i+1) * time.Second)
			at := clock.Now().Add(-time.Millisecond) // the API's clock, a little behind
			v, err := st.AgentOf(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			set := []KeyValue{{proto.InfoAgentURL, "http://10.0.0.5:9999"}, {proto.InfoAgentVersion, tc.version},
				{proto.InfoAgentLastHeartbeat, at.Format(time.RFC3339Nano)}}
			if tc.ca != "" {
				set = append(set, KeyValue{proto.InfoAgentVerifyCA, tc.ca})
			}
			if ok, err := st.RecordAgent(ctx, v, set, tc.touch); err != nil || !ok {
				t.Fatalf("heartbeat %d: RecordAgent = %v, %v", i, ok, err)
			}
			got, err := st.AgentOf(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != tc.version || got.VerifyCA != tc.ca || got.URL != "http://10.0.0.5:9999" || !got.HasURL ||
				!got.LastHeartbeat.Equal(at) || got.Token != "tok" {
				t.Fatalf("heartbeat %d: AgentOf = %+v, want version %q CA %q last heartbeat %v", i, got, tc.version, tc.ca, at)
			}
			// Heartbeats the API does not write leave this one: the
			// scan finds the node only after the timeout from it.
			if scan(at.Add(timeout)) {
				t.Errorf("heartbeat %d: the scan finds the node at the timeout's end, not past it", i)
			}
			if !scan(at.Add(timeout + time.Microsecond)) {
				t.Errorf("heartbeat %d: the scan misses the node past the heartbeat timeout", i)
			}
		}
	})
}
