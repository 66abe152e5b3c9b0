package conductor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/nodework"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// hasWork reports whether n carries something for its conductor to do now.
func hasWork(n *proto.Node) bool { return nodework.Now(n) }

// decideConfig is the part of the configuration decisions depend on.
func (c *Conductor) decideConfig() decide.Config {
	return decide.Config{APIURL: c.cfg.APIURL, CallbackTimeout: c.cfg.CallbackTimeout, AgentHeartbeatTimeout: c.cfg.AgentHeartbeatTimeout,
		InspectionRules: c.cfg.InspectionRules}
}

// process takes node uuid's reservation, does what it needs, and releases it.
func (c *Conductor) process(ctx context.Context, uuid string) {
	start := time.Now()
	n, held, err := c.reserve(ctx, uuid)
	c.waits.reserve.Observe(time.Since(start).Seconds())
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			c.waits.conflicts.Inc()
		}
		if !errors.Is(err, store.ErrLocked) && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			c.log.Warn("reserve node", "node", uuid, "err", err)
		}
		return
	}
	f := &flow{c: c, n: n, held: held}
	defer func() {
		c.waits.pass.Observe(time.Since(start).Seconds())
		if f.idle {
			c.waits.idle.Inc()
			c.log.Debug("pass found nothing to do", "node", uuid, "state", f.n.ProvisionState)
		}
		if !f.released {
			c.seenSince(uuid, time.Now()) // releaseAndRequeue reads the node after this
			c.releaseAndRequeue(ctx, uuid)
		} else {
			c.seenSince(uuid, f.releaseRead)
			if f.n.Reservation == nil && hasWork(f.n) && ctx.Err() == nil {
				// As releaseAndRequeue does, from the node as released.
				c.requeue(f.n)
			}
			if !nodework.IsWait(f.n.ProvisionState) {
				c.cancelWake(uuid) // no wait left to time out (see cancelWake)
			}
		}
	}()
	if !c.ownsNode(n) {
		return
	}
	f.release = true
	if n.Conductor == nil || *n.Conductor != c.cfg.Name {
		// The node's conductor field names who manages it now.
		if err := f.update(ctx, func(n *proto.Node) { name := c.cfg.Name; n.Conductor = &name }); err != nil {
			c.log.Warn("record conductor", "node", uuid, "err", err)
			return
		}
	}
	if err := f.act(ctx); err != nil && ctx.Err() == nil {
		c.log.Error("act on node", "node", uuid, "state", n.ProvisionState, "err", err)
	}
}

// flow is one reserved pass over one node.
type flow struct {
	c   *Conductor
	n   *proto.Node
	ifs driver.Set

	// pending are decided changes already made to n, not yet stored
	// (commit.go); release says the commit that ends the pass also gives
	// back the reservation, and released that it did.
	pending           []pendingUpdate
	release, released bool
	// events are history recorded since the last commit, stored with
	// the next one (commit.go).
	events []proto.HistoryEvent
	// releaseRead is when the write that released the node began: the
	// node it returned is at least as new as any write committed before.
	releaseRead time.Time
	// held is the store's version of the node as last reserved or
	// written by this pass (commit.go); nil: the next commit reads it.
	held *store.HeldNode
	// touched: the pass found an event to act on; idle: it found none
	// (waits.go counts those).
	touched, idle bool
	// mayGoOn: the pass may keep its node for another round when the
	// write that was to release it finds an agent heartbeat waiting;
	// goOn: it did; rounds: how many it added; acted: the round found
	// an event to act on (commit.go).
	mayGoOn, goOn, acted bool
	rounds               int
}

// update applies fn to the stored node (read-modify-write, so fields the API
// changed meanwhile, such as a heartbeat, survive) and keeps the result.
func (f *flow) update(ctx context.Context, fn func(n *proto.Node)) error {
	if err := f.commit(ctx); err != nil {
		return err
	}
	n, err := f.updateWithHistory(ctx, nil, func(n *proto.Node) error {
		if n.DriverInternalInfo == nil {
			n.DriverInternalInfo = proto.Dict{}
		}
		fn(n)
		guardSecrets(n)
		return nil
	})
	if err != nil {
		return fmt.Errorf("update node %s: %w", f.n.UUID, err)
	}
	f.n = n
	return nil
}

// updateFlow is update for changes of the node's flow state.
func (f *flow) updateFlow(ctx context.Context, fn func(n *proto.Node, s *flowstate.State)) error {
	return f.update(ctx, func(n *proto.Node) {
		flowstate.Update(n, func(s *flowstate.State) { fn(n, s) })
	})
}

func (f *flow) history(ctx context.Context, severity, event string) {
	ev := proto.HistoryEvent{Severity: severity, Event: secrets.Scrub(event), EventType: "conductor", Conductor: f.c.cfg.Name}
	if f.deferHistory(ev) {
		return
	}
	if err := f.c.st.AddHistory(ctx, f.n.UUID, ev); err != nil {
		f.c.log.Warn("record history", "node", f.n.UUID, "err", err)
	}
}

// latencies keeps heartbeat → next command delays for reporting.
type latencies struct {
	mu      sync.Mutex
	samples []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) < 100000 {
		l.samples = append(l.samples, d)
	}
}

// HeartbeatLatency returns the median and 99th percentile of the time from an
// agent heartbeat reaching the API to the conductor sending the next command.
func (c *Conductor) HeartbeatLatency() (p50, p99 time.Duration, n int) {
	c.lat.mu.Lock()
	s := append([]time.Duration(nil), c.lat.samples...)
	c.lat.mu.Unlock()
	if len(s) == 0 {
		return 0, 0, 0
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[(len(s)*99)/100], len(s)
}
