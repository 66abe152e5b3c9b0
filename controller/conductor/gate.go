package conductor

import (
	"context"
	"sync"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// On SQLite every write goes through one connection, and database/sql
// hands that connection to its waiters in no particular order. With every
// worker busy with a bulk operation (a fleet's provide: set the boot
// device, reboot, record each), forty writes wait at once, and a pass
// for an agent that heartbeated (a reservation and two writes, each
// waiting its turn at random) finds itself behind them: that was the
// heartbeat→command tail.
//
// The passes' writes now go through a gate of a few slots (Config.
// WriteSlots): the writer stays busy, bulk passes queue here rather than
// in the pool, and a slot that frees goes to an agent pass first. The
// conductor's own liveness, the scan and power sync's reads are not
// passes and do not wait here.

// passKind is what a pass was queued for: its writes' priority.
type passKind uint8

const (
	passNone  passKind = iota // not a pass: ungated
	passWork                  // a request, a wake, a scan's find
	passAgent                 // an agent heartbeated: first
)

type passKey struct{}

// withPass marks ctx as a pass of kind k.
func withPass(ctx context.Context, k passKind) context.Context {
	return context.WithValue(ctx, passKey{}, k)
}

func passOf(ctx context.Context) passKind {
	k, _ := ctx.Value(passKey{}).(passKind)
	return k
}

// writeGate lets n writes run at once; a freed slot goes to the oldest
// agent pass waiting, else to the oldest other.
type writeGate struct {
	mu            sync.Mutex
	free          int
	agents, works []chan struct{}
}

func newWriteGate(n int) *writeGate { return &writeGate{free: n} }

// enter waits for a slot; done gives it back. Writes outside a pass pass
// freely (done is a no-op).
func (g *writeGate) enter(ctx context.Context) (done func(), err error) {
	k := passOf(ctx)
	if k == passNone || g == nil {
		return func() {}, nil
	}
	g.mu.Lock()
	if g.free > 0 && len(g.agents) == 0 && (k == passAgent || len(g.works) == 0) {
		g.free--
		g.mu.Unlock()
		return g.leave, nil
	}
	ch := make(chan struct{})
	if k == passAgent {
		g.agents = append(g.agents, ch)
	} else {
		g.works = append(g.works, ch)
	}
	g.mu.Unlock()
	select {
	case <-ch:
		return g.leave, nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.drop(ch) {
			return nil, ctx.Err()
		}
		// Handed a slot just as ctx ended: give it on.
		g.handOn()
		return nil, ctx.Err()
	}
}

// leave gives a slot back: to the first agent waiting, else the first other.
func (g *writeGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.handOn()
}

// handOn passes one slot to the next waiter, or frees it (g.mu held).
func (g *writeGate) handOn() {
	switch {
	case len(g.agents) > 0:
		close(g.agents[0])
		g.agents = g.agents[1:]
	case len(g.works) > 0:
		close(g.works[0])
		g.works = g.works[1:]
	default:
		g.free++
	}
}

// drop removes ch from the waiters; false if it was already handed a slot.
func (g *writeGate) drop(ch chan struct{}) bool {
	for _, q := range []*[]chan struct{}{&g.agents, &g.works} {
		for i, c := range *q {
			if c == ch {
				*q = append((*q)[:i], (*q)[i+1:]...)
				return true
			}
		}
	}
	return false
}

// gatedStore is the store as passes use it: its node writes go through
// the gate.
type gatedStore struct {
	store.Store
	g *writeGate
}

// Unwrap is the store behind the gate (store.NewResources looks for it).
func (s gatedStore) Unwrap() store.Store { return s.Store }

func (s gatedStore) Reserve(ctx context.Context, ident, conductor string) (*proto.Node, error) {
	done, err := s.g.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.Store.Reserve(ctx, ident, conductor)
}

func (s gatedStore) Release(ctx context.Context, uuid, conductor string) error {
	done, err := s.g.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	return s.Store.Release(ctx, uuid, conductor)
}

func (s gatedStore) UpdateNode(ctx context.Context, ident string, fn func(n *proto.Node) error) (*proto.Node, error) {
	done, err := s.g.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.Store.UpdateNode(ctx, ident, fn)
}

func (s gatedStore) AddHistory(ctx context.Context, uuid string, ev proto.HistoryEvent) error {
	done, err := s.g.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	return s.Store.AddHistory(ctx, uuid, ev)
}
