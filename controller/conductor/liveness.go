package conductor

import (
	"context"
	"sync/atomic"
	"time"
)

// liveness counts this conductor's heartbeats, for tests and reporting.
type liveness struct {
	beats    atomic.Uint64 // heartbeats the store accepted
	failures atomic.Uint64 // heartbeats the store refused or timed out
}

// Heartbeats returns how many liveness heartbeats the store accepted and how
// many failed since Run started.
func (c *Conductor) Heartbeats() (ok, failed uint64) {
	return c.live.beats.Load(), c.live.failures.Load()
}

// heartbeatLoop tells the store this conductor is alive every
// HeartbeatInterval. It runs on a goroutine of its own and does nothing
// else: no BMC call, node scan or ring refresh shares it, so slow hardware
// or a long scan can never make peers declare this conductor dead.
func (c *Conductor) heartbeatLoop(ctx context.Context) {
	every(ctx, c.cfg.HeartbeatInterval, c.heartbeat)
}

// every calls fn at each tick of interval until ctx ends; a call that
// overruns delays the next rather than overlapping it. Each periodic job
// runs in a loop of its own so that none can delay another.
func every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn(ctx)
	}
}

// heartbeat writes one liveness heartbeat, bounded so that a stalled
// database call cannot hold the loop for long.
func (c *Conductor) heartbeat(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, max(2*c.cfg.HeartbeatInterval, 5*time.Second))
	defer cancel()
	if err := c.st.HeartbeatConductor(hctx, c.cfg.Name); err != nil {
		if ctx.Err() != nil {
			return
		}
		c.live.failures.Add(1)
		c.log.Warn("conductor heartbeat", "err", err)
		return
	}
	c.live.beats.Add(1)
}

// peersLoop follows the other conductors: it rebuilds the hash ring from the
// live ones and frees the reservations of dead ones, every HeartbeatInterval.
func (c *Conductor) peersLoop(ctx context.Context) {
	every(ctx, c.cfg.HeartbeatInterval, func(ctx context.Context) {
		if err := c.refreshRing(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("refresh ring", "err", err)
		}
		if released, err := c.st.ReleaseDead(ctx); err == nil && len(released) > 0 {
			c.log.Warn("released reservations of dead conductors", "nodes", len(released))
			for _, u := range released {
				c.Notify(u)
			}
		}
	})
}
