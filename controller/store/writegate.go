package store

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// SQLite has one writer: the store keeps one connection for writes, and
// every write waits for it. database/sql hands a freed connection to a
// random waiter (connRequestSet.TakeRandom), so with forty conductor
// workers and the API's handlers waiting, a write's wait had no bound but
// luck: in a 10,000-machine fleet those waits were most of an agent's
// median heartbeat-to-next-command delay and a fifth of its p99
// (docs/bench-fleet.md, "SQLite's writer, served in order"). writeGate
// queues the writes in front of the connection instead, first come first
// served, and lets a write on an agent's path (Urgent) go ahead of bulk
// work, which does not wait on anyone: a provide of thousands of nodes
// takes as long either way, while each agent idles until its next
// command.

// urgentKey marks a context whose writes go ahead (Urgent).
type urgentKey struct{}

// Urgent returns ctx with its writes ahead of other waiting ones where
// the store has a single writer (SQLite): for the writes an agent waits
// on, its heartbeat's and those of the pass that sends its next command.
func Urgent(ctx context.Context) context.Context {
	if IsUrgent(ctx) {
		return ctx
	}
	return context.WithValue(ctx, urgentKey{}, true)
}

// UrgentOnce returns ctx whose writes are urgent once flag is set: for
// work an agent starts waiting on midway (its heartbeat came while a pass
// held its node).
func UrgentOnce(ctx context.Context, flag *atomic.Bool) context.Context {
	return context.WithValue(ctx, urgentKey{}, flag)
}

// IsUrgent reports whether ctx was marked by Urgent, or by UrgentOnce
// with its flag set by now.
func IsUrgent(ctx context.Context) bool {
	switch v := ctx.Value(urgentKey{}).(type) {
	case bool:
		return v
	case *atomic.Bool:
		return v.Load()
	}
	return false
}

// urgentBurst is how many urgent writes in a row may pass while another
// write waits: a steady stream of agents cannot starve bulk work.
const urgentBurst = 8

// writeGate admits one write at a time, urgent ones first, each class in
// order of arrival.
type writeGate struct {
	mu   sync.Mutex
	held bool
	// waiting: [0] urgent, [1] other, oldest first.
	waiting [2][]*gateWaiter
	// run counts urgent grants in a row while other writes waited.
	run int
}

type gateWaiter struct {
	ready   chan struct{}
	granted bool // under mu: the gate is this waiter's
}

// acquire waits for the gate; it fails only when ctx ends first.
func (g *writeGate) acquire(ctx context.Context) error {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		return nil
	}
	class := 1
	if IsUrgent(ctx) {
		class = 0
	}
	w := &gateWaiter{ready: make(chan struct{})}
	g.waiting[class] = append(g.waiting[class], w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if w.granted {
		// Handed over as ctx ended: pass it on.
		g.mu.Unlock()
		g.release()
		return ctx.Err()
	}
	if i := slices.Index(g.waiting[class], w); i >= 0 {
		g.waiting[class] = slices.Delete(g.waiting[class], i, i+1)
	}
	g.mu.Unlock()
	return ctx.Err()
}

// release hands the gate to the next waiter, or frees it.
func (g *writeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.next()
	if w == nil {
		g.held = false
		return
	}
	w.granted = true
	close(w.ready)
}

// next takes the waiter the gate goes to next (nil: none waits).
func (g *writeGate) next() *gateWaiter {
	urgent, other := len(g.waiting[0]) > 0, len(g.waiting[1]) > 0
	class := 1
	switch {
	case urgent && (!other || g.run < urgentBurst):
		class = 0
		if other {
			g.run++
		}
	case other:
		g.run = 0
	default:
		return nil
	}
	w := g.waiting[class][0]
	g.waiting[class][0] = nil
	g.waiting[class] = g.waiting[class][1:]
	return w
}

// waiters is how many writes wait, urgent and other (tests).
func (g *writeGate) waiters() (urgent, other int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting[0]), len(g.waiting[1])
}
