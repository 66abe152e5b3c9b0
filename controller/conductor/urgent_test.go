package conductor

import (
	"context"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// urgencyStore records, for each node reserved, whether the pass's writes
// were marked urgent, and refuses the reservation so the pass ends there.
type urgencyStore struct {
	store.Store
	urgent chan [2]any
}

func (s *urgencyStore) Reserve(ctx context.Context, ident, _ string) (*proto.Node, error) {
	s.urgent <- [2]any{ident, store.IsUrgent(ctx)}
	return nil, store.ErrLocked
}

// A worker's pass for a node from the agent lane (an agent waiting for
// its next command) writes as urgent; one from the work lane does not.
func TestAgentLanePassesWriteUrgent(t *testing.T) {
	st := &urgencyStore{urgent: make(chan [2]any)}
	c := New(Config{Name: "c1", Store: st})
	c.Notify("work-node")
	c.NotifyAgent("agent-node")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.worker(ctx, c.pick)
	}()
	got := map[any]any{}
	for range 2 {
		r := <-st.urgent
		got[r[0]] = r[1]
	}
	cancel()
	<-done
	if got["agent-node"] != true || got["work-node"] != false {
		t.Errorf("urgent by node %v; want agent-node true, work-node false", got)
	}
}
