package store

import (
	"context"
	"sync"
)

// urgentKey marks a context whose writes go first.
type urgentKey struct{}

// Urgent marks ctx's writes as urgent: on SQLite, whose one writer
// connection serializes every write, they are served before the queued
// ordinary ones (see writeGate). The conductor marks the passes of agents
// waiting for their next command; the API marks agent heartbeats and
// lookups. Work that can wait (new nodes starting, scans, operators'
// requests) stays ordinary.
func Urgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

// IsUrgent tells whether Urgent marked ctx.
func IsUrgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

// writeGate hands SQLite's one writer to one transaction at a time,
// urgent waiters first. database/sql hands out a busy pool's connection
// in arrival order, so in a 2,000-node fleet an agent's next command
// waited behind the thousands of ordinary writes of nodes starting their
// clean or deploy (reserve p50 29 ms, hb→cmd p99 0.5 s). Urgent waiters do
// not starve the others: after urgentRun urgent grants in a row while
// ordinary ones wait, the oldest ordinary waiter goes.
type writeGate struct {
	urgentRun int

	mu     sync.Mutex
	held   bool
	urgent []chan struct{} // waiters, oldest first
	normal []chan struct{}
	run    int // urgent grants in a row while ordinary ones waited
}

// writeGateRun is urgentRun for the store: an urgent write is one short
// transaction, so ordinary ones wait at most this many of them.
const writeGateRun = 4

func newWriteGate(run int) *writeGate { return &writeGate{urgentRun: run} }

// acquire waits for the writer, as an urgent waiter when urgent; it
// returns ctx's error, holding nothing, when ctx ends first.
func (g *writeGate) acquire(ctx context.Context, urgent bool) error {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if urgent {
		g.urgent = append(g.urgent, ch)
	} else {
		g.normal = append(g.normal, ch)
	}
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if g.remove(ch, urgent) {
		g.mu.Unlock()
		return ctx.Err()
	}
	// Granted as ctx ended: pass the writer on.
	g.mu.Unlock()
	g.release()
	return ctx.Err()
}

// remove takes ch out of its queue; false when it is no longer there
// (release granted it).
func (g *writeGate) remove(ch chan struct{}, urgent bool) bool {
	q := &g.normal
	if urgent {
		q = &g.urgent
	}
	for i, c := range *q {
		if c == ch {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}

// release hands the writer to the next waiter, or frees it.
func (g *writeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	var next chan struct{}
	switch {
	case len(g.urgent) > 0 && (len(g.normal) == 0 || g.run < g.urgentRun):
		next, g.urgent = g.urgent[0], g.urgent[1:]
		if len(g.normal) > 0 {
			g.run++
		}
	case len(g.normal) > 0:
		next, g.normal = g.normal[0], g.normal[1:]
		g.run = 0
	default:
		g.held, g.run = false, 0
		return
	}
	close(next) // the writer passes to next: held stays true
}
