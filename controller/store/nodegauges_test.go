package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// TestNodeGauges: the counts come from the columns, labelled as the nodes
// are (no power state is ""), and the heartbeats are the documents' own,
// or the narrow stamp when it is newer; a node whose document records no
// heartbeat is left out, even with a stamp of an earlier wait.
func TestNodeGauges(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		st := openT(t, dsn, Options{Now: clock.Now})
		on, off := proto.PowerOn, proto.PowerOff
		t0 := clock.Now().Add(-42 * time.Second).UTC().Truncate(time.Microsecond)
		stamp := func(at time.Time) proto.Dict {
			return proto.Dict{proto.InfoAgentToken: "tok", proto.InfoAgentLastHeartbeat: at.Format(time.RFC3339Nano)}
		}
		nodes := []*proto.Node{
			{UUID: "a0000000-0000-4000-8000-000000000001", ProvisionState: proto.StateActive, PowerState: &on},
			{UUID: "a0000000-0000-4000-8000-000000000002", ProvisionState: proto.StateActive, PowerState: &on},
			{UUID: "a0000000-0000-4000-8000-000000000003", ProvisionState: proto.StateActive, PowerState: &on, Maintenance: true},
			{UUID: "a0000000-0000-4000-8000-000000000004", ProvisionState: proto.StateEnroll},
			{UUID: "a0000000-0000-4000-8000-000000000005", ProvisionState: proto.StateDeployWait, PowerState: &off, DriverInternalInfo: stamp(t0)},
			{UUID: "a0000000-0000-4000-8000-000000000006", ProvisionState: proto.StateCleanWait, PowerState: &on, DriverInternalInfo: stamp(t0)},
		}
		for _, n := range nodes {
			n.Driver = "fake-hardware"
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		// Node 6's agent heartbeats again: a narrow stamp, newer.
		t1 := t0.Add(30 * time.Second)
		v, err := st.AgentOf(ctx, nodes[5].UUID)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RecordSeen(ctx, v, t1); err != nil || !ok {
			t.Fatalf("RecordSeen = %v, %v", ok, err)
		}
		// Node 1 has a stamp, but its document records no heartbeat.
		if _, err := st.(*sqlStore).execWrite(ctx, "INSERT INTO node_agent_seen (node_id, last_heartbeat) SELECT id, ? FROM nodes WHERE uuid = ?",
			t1.UnixMicro(), nodes[0].UUID); err != nil {
			t.Fatal(err)
		}

		counts, beats, err := NodeGauges(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(counts, func(a, b NodeCount) int {
			if a.ProvisionState != b.ProvisionState {
				return compareStrings(a.ProvisionState, b.ProvisionState)
			}
			if a.Maintenance != b.Maintenance {
				return map[bool]int{false: -1, true: 1}[a.Maintenance]
			}
			return compareStrings(a.PowerState, b.PowerState)
		})
		want := []NodeCount{
			{ProvisionState: "active", PowerState: "power on", Count: 2},
			{ProvisionState: "active", PowerState: "power on", Maintenance: true, Count: 1},
			{ProvisionState: "clean wait", PowerState: "power on", Count: 1},
			{ProvisionState: "enroll", PowerState: "", Count: 1},
			{ProvisionState: "wait call-back", PowerState: "power off", Count: 1},
		}
		if !slices.Equal(counts, want) {
			t.Errorf("counts = %+v\nwant     %+v", counts, want)
		}
		got := map[string]time.Time{}
		for _, b := range beats {
			got[b.UUID] = b.Last
		}
		if len(got) != 2 || !got[nodes[4].UUID].Equal(t0) || !got[nodes[5].UUID].Equal(t1) {
			t.Errorf("heartbeats = %v; want node 5 at %v (its document) and node 6 at %v (its stamp)", got, t0, t1)
		}
	})
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
