package conductor

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilnhq/kiln/proto"
)

// waitUntil yields until cond holds; it decides nothing by the clock.
func waitUntil(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// With every place taken, the worker waiting for the next bulk node holds
// the turn, and the others still take agents' nodes; a node whose agent
// heartbeats while it waits for a place goes to the agent lane, and the
// place goes to the work lane's next node.
func TestBulkPassesLeaveWorkersToAgents(t *testing.T) {
	ctx := context.Background()
	c := New(Config{Name: "c1", BulkPasses: 2})
	for _, u := range []string{"w0", "w1", "w2", "w3"} {
		c.Notify(u)
	}
	for _, want := range []string{"w0", "w1"} {
		if u, l, _ := c.next(ctx); u != want || l != laneWork {
			t.Fatalf("next = %s (lane %d), want %s from the work lane", u, l, want)
		}
	}
	if n := len(c.places); n != 0 {
		t.Fatalf("%d places free with two bulk passes of two, want 0", n)
	}
	if n := testutil.ToFloat64(c.waits.inUse); n != 2 {
		t.Fatalf("places in use = %v, want 2", n)
	}

	type taken struct {
		uuid string
		l    lane
	}
	third := make(chan taken, 1)
	go func() {
		u, l, _ := c.next(ctx)
		third <- taken{u, l}
	}()
	waitUntil(func() bool { return len(c.queue) == 1 }) // it holds w2, waiting for a place

	c.NotifyAgent("a1")
	if u, l, _ := c.next(ctx); u != "a1" || l != laneAgent {
		t.Fatalf("next = %s (lane %d), want the agent's a1 while the bulk passes are full", u, l)
	}
	c.NotifyAgent("w2") // w2's agent heartbeats while w2 waits for a place
	if u, l, _ := c.next(ctx); u != "w2" || l != laneAgent {
		t.Fatalf("next = %s (lane %d), want w2 from the agent lane", u, l)
	}
	select {
	case got := <-third:
		t.Fatalf("a bulk node (%s) was taken without a free place", got.uuid)
	default:
	}

	c.done("w0")
	if got := <-third; got.uuid != "w3" || got.l != laneWork {
		t.Fatalf("after a place was freed, next = %s (lane %d), want w3 from the work lane", got.uuid, got.l)
	}
	for _, u := range []string{"w1", "w2", "w3", "a1"} {
		c.done(u)
	}
	if n := len(c.places); n != 2 {
		t.Fatalf("%d places free after every pass ended, want 2", n)
	}
}

// setSlowCall sets slowCall for one test.
func setSlowCall(t *testing.T, d time.Duration) {
	old := slowCall
	slowCall = d
	t.Cleanup(func() { slowCall = old })
}

// newPlace is a pass's place, the only one there is.
func newPlace() *place {
	return &place{places: make(chan struct{}, 1), held: true, awaited: new(atomic.Bool)}
}

// slowCallElsewhere starts a slow call of a pass holding the only place,
// and has another pass take the place the call gave up; it returns the
// pass's place and what the pass runs after the call.
func slowCallElsewhere(t *testing.T, ctx context.Context) (*place, func()) {
	setSlowCall(t, 0)
	p := newPlace()
	back := p.aside(ctx)
	waitUntil(func() bool { return len(p.places) == 1 })
	<-p.places
	return p, back
}

func TestPlaceAside(t *testing.T) {
	t.Run("a quick call keeps the place", func(t *testing.T) {
		setSlowCall(t, time.Hour)
		p := newPlace()
		back := p.aside(context.Background())
		if len(p.places) != 0 {
			t.Fatal("the place was given up before the call was slow")
		}
		back()
		if !p.held || len(p.places) != 0 {
			t.Fatalf("held %v, %d free: the quick call's pass lost its place", p.held, len(p.places))
		}
		p.leave()
		if len(p.places) != 1 {
			t.Fatal("the place was not given back at the pass's end")
		}
	})
	t.Run("a slow call gives it up and takes one again", func(t *testing.T) {
		p, back := slowCallElsewhere(t, context.Background())
		returned := make(chan struct{})
		go func() { back(); close(returned) }()
		select {
		case <-returned:
			t.Fatal("the pass went on while another held the only place")
		default:
		}
		p.places <- struct{}{}
		<-returned
		if !p.held || len(p.places) != 0 {
			t.Fatalf("held %v, %d free, want the place taken again", p.held, len(p.places))
		}
	})
	t.Run("a pass its agent waits on goes on without one", func(t *testing.T) {
		p, back := slowCallElsewhere(t, context.Background())
		p.awaited.Store(true)
		back()
		if p.held {
			t.Fatal("the pass holds a place it was not given")
		}
		p.leave()
		if len(p.places) != 0 {
			t.Fatal("a pass without a place gave one back at its end")
		}
	})
	t.Run("a stopping pass does not wait for one", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p, back := slowCallElsewhere(t, ctx)
		cancel()
		back()
		if p.held {
			t.Fatal("a cancelled pass holds a place")
		}
	})
	t.Run("an agent-lane pass has none to give", func(t *testing.T) {
		var p *place
		p.aside(context.Background())()
		p.leave()
	})
}

// A bulk pass waiting on a slow BMC leaves its place to the next bulk
// node: with one place, the passes of nodes A and B are both in a BMC
// call that has not answered. Which node comes first is not fixed (the
// conductor's first scan may queue both).
func TestASlowBMCCallGivesItsPlaceUp(t *testing.T) {
	setSlowCall(t, 0)
	c, st := testConductor(t, Config{Workers: 2, AgentWorkers: 1, BulkPasses: 1, ScanInterval: time.Hour, PowerSyncInterval: -1})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	uuids := addNodes(t, st, testHW, 2, func(int) string { return "" })
	inCall := make(chan string, len(uuids))
	unblock := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]bool{}
	defer close(unblock)
	power.set(func(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
		mu.Lock()
		if !seen[n.UUID] {
			seen[n.UUID] = true
			inCall <- n.UUID
		}
		mu.Unlock()
		select {
		case <-unblock:
		case <-ctx.Done():
		}
		return proto.PowerOff, nil
	})
	defer power.set(nil)
	verifying(t, st, uuids...)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = c.Run(ctx)
	}()
	c.Notify(uuids[0])
	c.Notify(uuids[1])
	for range uuids {
		select {
		case <-inCall:
		case <-time.After(time.Minute): // safety net only: the second pass waits for the first's place
			t.Fatal("one pass's BMC call kept the only place: the other pass never ran")
		}
	}
	if n := testutil.ToFloat64(c.waits.givenUp); n < 1 {
		t.Errorf("%v places given up counted, want at least the first call's", n)
	}
}
