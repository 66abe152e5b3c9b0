package conductor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/prometheus/client_golang/prometheus"
)

// Bulk work is bounded by places, not by workers. On two cores, thirty-two
// passes of a bulk operation computing at once (reading and writing nodes,
// talking to BMCs) left the passes agents wait on a small share of the
// CPU; with eight, the heartbeat-to-command p99 of a 10,000-machine fleet
// fell by half (docs/bench-fleet.md). Yet a real BMC takes seconds to
// answer, and eight workers waiting on eight slow BMCs would leave the
// cores idle. So a work-lane pass needs one of Config.BulkPasses places to
// compute, and gives it up while a call of its own to a BMC or an agent is
// slow; the workers (Config.Workers) bound how many such calls are waited
// on at once. Agent-lane passes need no place.

// slowCall is how long a pass's call to a BMC or an agent may take before
// the pass gives its place up for the rest of the call. The fleet's
// simulated BMCs answer within it, real ones mostly do not.
var slowCall = 50 * time.Millisecond

// place is a work-lane pass's right to compute. Only the worker running
// the pass touches it, but for the timer in aside, which only gives the
// place back.
type place struct {
	places  chan struct{}
	givenUp prometheus.Counter
	held    bool
	// awaited is set once the node's agent heartbeated while the pass
	// held it (worker): the pass then goes on without a place.
	awaited *atomic.Bool
}

// nextWork waits, holding the turn, for the work lane's next node and a
// place for it. Only the turn's holder waits here, so a worker waiting
// for a place never holds a node an agent waits on, and idle workers do
// not hold places that passes back from a slow call need.
func (c *Conductor) nextWork(ctx context.Context) (string, bool) {
	for {
		var uuid string
		select {
		case <-ctx.Done():
			return "", false
		case uuid = <-c.queue:
		}
		if !c.isQueued(uuid, laneWork) {
			continue // stale (see take)
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-c.places:
		}
		if !c.take(uuid, laneWork) {
			c.places <- struct{}{} // its agent heartbeated meanwhile
			continue
		}
		c.mu.Lock()
		c.placed[uuid] = &place{places: c.places, givenUp: c.waits.givenUp, held: true}
		c.mu.Unlock()
		return uuid, true
	}
}

// isQueued reports whether uuid still waits in lane l.
func (c *Conductor) isQueued(uuid string, l lane) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued[uuid] == l
}

// leave gives the place back at the end of the pass, if it holds one.
func (p *place) leave() {
	if p != nil && p.held {
		p.held = false
		p.places <- struct{}{}
	}
}

// aside is called before a call that may wait on hardware or an agent;
// the function it returns, after it. Past slowCall the place is given up
// for other passes, and taken again after the call, unless the node's
// agent heartbeated meanwhile: the pass then goes on as the agent lane's
// passes do, without one.
func (p *place) aside(ctx context.Context) func() {
	if p == nil || !p.held {
		return func() {}
	}
	t := time.AfterFunc(slowCall, func() {
		// Counted before it is given: whoever takes the place sees the count.
		if p.givenUp != nil {
			p.givenUp.Inc()
		}
		p.places <- struct{}{}
	})
	return func() {
		if t.Stop() {
			return // quick: the place was kept
		}
		p.held = false
		if p.awaited != nil && p.awaited.Load() {
			return
		}
		select {
		case <-ctx.Done():
		case <-p.places:
			p.held = true
		}
	}
}

type placeKey struct{}

// withPlace hands a pass its place, for the calls it makes (aside).
func withPlace(ctx context.Context, p *place) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, placeKey{}, p)
}

// placeOf is the place ctx's pass holds; nil (which aside accepts) for
// an agent-lane pass.
func placeOf(ctx context.Context) *place {
	p, _ := ctx.Value(placeKey{}).(*place)
	return p
}

// waitsOutside reports whether action a may wait on a BMC or an agent, so
// that a pass gives its place up while a is slow. Actions on the store
// and decisions keep it: a pass waiting on the writer still computes
// when it gets it.
func waitsOutside(a decide.Action) bool {
	switch a.(type) {
	case decide.Update, decide.History, decide.Wake, decide.BuildImageArgs, decide.ReadInventory,
		decide.StoreInventory, decide.CreatePorts, decide.EndAllocation:
		return false
	}
	return true
}
