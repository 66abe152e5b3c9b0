package conductor

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// urgencyStore notes, for each reservation and node write, whether its
// context asks for the write to go ahead of bulk work (store.Urgent).
type urgencyStore struct {
	store.Store
	mu     sync.Mutex
	urgent []bool
	// reserved, when set, runs after each reservation.
	reserved func()
}

func (s *urgencyStore) note(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.urgent = append(s.urgent, store.IsUrgent(ctx))
}

func (s *urgencyStore) Reserve(ctx context.Context, ident, conductor string) (*proto.Node, error) {
	s.note(ctx)
	n, err := s.Store.Reserve(ctx, ident, conductor)
	if s.reserved != nil {
		s.reserved()
	}
	return n, err
}

func (s *urgencyStore) UpdateNode(ctx context.Context, ident string, fn func(n *proto.Node) error) (*proto.Node, error) {
	s.note(ctx)
	return s.Store.UpdateNode(ctx, ident, fn)
}

// passFromLane has a worker take one pass over a node in clean wait whose
// agent finished the first of three steps and finishes the others at
// once, queued in lane l; it gives the urgency of each of the pass's
// writes, in order. With beatAtReserve the agent heartbeats again as the
// pass takes the node.
func passFromLane(t *testing.T, l lane, beatAtReserve bool) []bool {
	t.Helper()
	ctx := context.Background()
	base := openCountingStore(t).Store
	st := &urgencyStore{Store: base}
	c, agent := instantClean(t, base, st, "0d9c8b7a-6f5e-4d3c-9b2a-1f0e9d8c7b6a", 3)
	uuid := agent.uuid
	if beatAtReserve {
		st.reserved = func() { c.NotifyAgent(uuid) }
	}
	if l == laneAgent {
		c.NotifyAgent(uuid)
	} else {
		c.Notify(uuid)
	}
	taken := false
	c.worker(ctx, func(ctx context.Context) (string, lane, bool) {
		if taken {
			return "", laneNone, false
		}
		taken = true
		return c.next(ctx)
	})
	if agent.err != nil {
		t.Fatal(agent.err)
	}
	if want := []string{"step_1", "step_2"}; !slices.Equal(agent.executed, want) {
		t.Fatalf("steps sent %v, want %v", agent.executed, want)
	}
	return st.urgent
}

// A pass for an agent that heartbeated writes ahead of bulk work from
// its reservation on: the agent waits for the command the pass sends.
func TestAnAgentLanePassWritesAhead(t *testing.T) {
	urgent := passFromLane(t, laneAgent, false)
	if len(urgent) < 3 || slices.Contains(urgent, false) {
		t.Errorf("writes urgent %v, want every one", urgent)
	}
}

// A pass taken from the work lane writes as bulk work does until it
// goes on to answer a heartbeat that came while it held the node; from
// then on its writes go ahead.
func TestAPassWritesAheadOnceItAnswersAHeartbeat(t *testing.T) {
	urgent := passFromLane(t, laneWork, false)
	i := slices.Index(urgent, true)
	if i <= 0 || slices.Contains(urgent[i:], false) {
		t.Errorf("writes urgent %v, want some not, then only urgent ones", urgent)
	}
}

// A pass taken from the work lane writes ahead from the moment its
// node's agent heartbeats: the agent waits on what the pass does next.
func TestAPassWritesAheadOnceItsAgentHeartbeats(t *testing.T) {
	urgent := passFromLane(t, laneWork, true)
	if len(urgent) < 3 || urgent[0] || slices.Contains(urgent[1:], false) {
		t.Errorf("writes urgent %v, want the reservation not, every later one", urgent)
	}
}
