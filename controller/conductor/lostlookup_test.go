package conductor

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// TestLostLookupFoundByScanAndRebooted is the node the PostgreSQL kill run
// left in wait call-back: the controller that served the agent's lookup
// issued the token and died before answering, so the agent can never
// heartbeat. The scan finds the node by index once the heartbeat timeout
// has run from the lookup, and the conductor boots the agent again, the
// wait going on and the lost token wiped, instead of waiting 30 minutes
// for the call-back timeout.
func TestLostLookupFoundByScanAndRebooted(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	target := proto.StateActive
	now := time.Now()
	mk := func(uuid string, lookedUp time.Duration) {
		n := &proto.Node{UUID: uuid, Driver: "fake-hardware", ProvisionState: proto.StateDeployWait,
			PowerInterface: "fake", ManagementInterface: "fake", BootInterface: "fake", InspectInterface: "fake", DeployInterface: "fake",
			TargetProvisionState: &target, ProvisionUpdatedAt: &proto.Time{Time: now.Add(-5 * time.Minute)},
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "lost-token",
				"kiln_agent_token_issued_at": now.Add(-lookedUp).UTC().Format(time.RFC3339Nano)}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	const lost, recent = "6a1f0c2e-9b7d-4c3a-8e5f-1d2c3b4a5f61", "6a1f0c2e-9b7d-4c3a-8e5f-1d2c3b4a5f62"
	mk(lost, 2*time.Minute)
	mk(recent, 10*time.Second)
	c := New(Config{Store: st, Agent: &stubAgent{}, Name: "c1", AgentHeartbeatTimeout: time.Minute})

	c.scan(ctx)
	c.mu.Lock()
	queued := len(c.queued)
	_, found := c.queued[lost]
	c.mu.Unlock()
	if !found || queued != 1 {
		t.Fatalf("scan queued %d nodes (the lost lookup's: %v); want only the node looked up 2 min ago", queued, found)
	}
	c.mu.Lock()
	clear(c.queued) // as next does when a worker takes it
	c.mu.Unlock()
	c.process(ctx, lost)

	got, err := st.GetNode(ctx, lost)
	if err != nil {
		t.Fatal(err)
	}
	if got.ProvisionState != proto.StateDeployWait || got.LastError != nil || got.Reservation != nil {
		t.Errorf("state %s, last_error %v, reservation %v: want the wait going on, free", got.ProvisionState, got.LastError, got.Reservation)
	}
	for _, k := range []string{proto.InfoAgentToken, "kiln_agent_token_issued_at"} {
		if v, ok := got.DriverInternalInfo[k]; ok {
			t.Errorf("%s = %v kept: the new agent's lookup could not get a token", k, v)
		}
	}
	if got.PowerState == nil || *got.PowerState != proto.PowerOn {
		t.Errorf("power state %v, want power on after the reboot", got.PowerState)
	}
	events, err := st.ListHistory(ctx, lost)
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	for _, e := range events {
		warned = warned || (e.Severity == "WARNING" && strings.Contains(e.Event, "booting the agent again"))
	}
	if !warned {
		t.Errorf("history %+v: want a warning that the agent is booted again", events)
	}
	// Until a new lookup, the wait runs from its start again: the next
	// scan leaves the node alone.
	c.scan(ctx)
	c.mu.Lock()
	_, again := c.queued[lost]
	c.mu.Unlock()
	if again {
		t.Error("the next scan queued the rebooted node again")
	}
}
