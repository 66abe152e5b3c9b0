package conductor

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// drain takes every queued node in the order the workers would.
func drain(c *Conductor) []string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	for len(c.agents)+len(c.queue) > 0 {
		u, _, ok := c.next(ctx)
		if !ok {
			break
		}
		got = append(got, u)
		c.done(u)
	}
	return got
}

// TestHeartbeatsGoFirst: with a bulk operation's nodes queued, a node whose
// agent heartbeated is taken next, even one already queued behind them,
// and each node is looked at once.
func TestHeartbeatsGoFirst(t *testing.T) {
	c := New(Config{Name: "c1"})
	var bulk []string
	for i := range 100 {
		u := fmt.Sprintf("bulk-%03d", i)
		bulk = append(bulk, u)
		c.Notify(u)
	}
	c.NotifyAgent("agent-1")
	c.NotifyAgent("bulk-050") // queued for other work, then its agent heartbeated
	c.NotifyAgent("agent-1")  // already waiting in the agent lane
	c.Notify("agent-1")       // and nothing moves it back
	got := drain(c)
	want := append([]string{"agent-1", "bulk-050"}, slices.Delete(slices.Clone(bulk), 50, 51)...)
	if !slices.Equal(got, want) {
		t.Fatalf("taken in order\n%v\nwant\n%v", got, want)
	}
}

// TestHeartbeatWhileHeldGoesFirst: a heartbeat that arrives while the
// conductor holds the node (its agent finished the command just sent) is
// requeued ahead of other work when the node is released: it does not
// wait behind the queue, nor for the next scan.
func TestHeartbeatWhileHeldGoesFirst(t *testing.T) {
	ctx := context.Background()
	c, st := testConductor(t, Config{})
	uuids := addNodes(t, st, testHW, 3, func(int) string { return "" })
	held, other := uuids[0], uuids[1]
	if _, err := st.Reserve(ctx, held, "c1"); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		c.Notify(fmt.Sprintf("bulk-%02d", i))
	}
	// The API records the heartbeat; its wake-up finds the node held.
	if _, err := st.UpdateNode(ctx, held, func(n *proto.Node) error {
		flowstate.Update(n, func(s *flowstate.State) { s.HeartbeatPending = time.Now() })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Another node with plain work is released at the same time.
	if _, err := st.UpdateNode(ctx, other, func(n *proto.Node) error { n.TargetPowerState = ptr(proto.PowerOn); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, other, "c1"); err != nil {
		t.Fatal(err)
	}
	c.releaseAndRequeue(ctx, other)
	c.releaseAndRequeue(ctx, held)
	got := drain(c)
	if len(got) != 52 || got[0] != held || got[len(got)-1] != other {
		t.Fatalf("taken %v; want %s first and %s after the 50 queued before it", got, held, other)
	}
}
