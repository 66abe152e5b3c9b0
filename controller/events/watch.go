package events

import (
	"context"
	"sync"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Change is one observed node change: the node as stored after it, the
// event it gives, and the previous event of the same node (zero UUID when
// this process had not seen the node before).
type Change struct {
	Before Event
	After  Event
	Node   *proto.Node
}

// Observer is called, synchronously and in store order for one node, with
// every change that alters a node's event. It must be quick.
type Observer func(Change)

// Watch returns st with every node write observed: each CreateNode,
// UpdateNode and DeleteNode that changes what an Event shows is passed to the
// observers (typically Bus.Publish and the metrics). Writes that change
// nothing visible — a reservation, a heartbeat timestamp — are not reported.
// Putting this on the store, the single path of node writes in both the API
// and the conductor, means neither needs to remember to publish.
func Watch(st store.Store, observers ...Observer) store.Store {
	return &watched{Store: st, observers: observers, last: map[string]Event{}}
}

// PublishTo is an Observer that publishes each change's event on b.
func PublishTo(b *Bus) Observer { return func(c Change) { b.Publish(c.After) } }

type watched struct {
	store.Store
	observers []Observer

	mu   sync.Mutex
	last map[string]Event
}

// Unwrap gives the store watched, for store.NewResources (resources other
// than nodes send no node events).
func (w *watched) Unwrap() store.Store { return w.Store }

func (w *watched) observe(n *proto.Node, deleted bool) {
	e := FromNode(n)
	e.Deleted = deleted
	w.mu.Lock()
	before, seen := w.last[n.UUID]
	if seen && same(before, e) {
		w.mu.Unlock()
		return
	}
	if deleted {
		delete(w.last, n.UUID)
	} else {
		w.last[n.UUID] = e
	}
	// Observers run under the lock so that one node's changes reach them in
	// the order they were stored.
	defer w.mu.Unlock()
	for _, o := range w.observers {
		o(Change{Before: before, After: e, Node: n})
	}
}

func (w *watched) CreateNode(ctx context.Context, n *proto.Node) error {
	if err := w.Store.CreateNode(ctx, n); err != nil {
		return err
	}
	w.observe(n, false)
	return nil
}

func (w *watched) UpdateNode(ctx context.Context, ident string, fn func(n *proto.Node) error) (*proto.Node, error) {
	n, err := w.Store.UpdateNode(ctx, ident, fn)
	if err != nil {
		return n, err
	}
	w.observe(n, false)
	return n, nil
}

// UpdateNodeWithHistory is UpdateNode's with the watched store's history
// writer, or an UpdateNode then AddHistory when it has none.
func (w *watched) UpdateNodeWithHistory(ctx context.Context, ident string, fn func(n *proto.Node) error, events []proto.HistoryEvent) (*proto.Node, error) {
	hw, ok := w.Store.(store.NodeHistoryWriter)
	if !ok {
		n, err := w.UpdateNode(ctx, ident, fn)
		if err != nil {
			return n, err
		}
		// Best effort, as the conductor's history always was: the
		// update is stored, an event lost is not worth failing it.
		for _, ev := range events {
			_ = w.Store.AddHistory(ctx, n.UUID, ev)
		}
		return n, nil
	}
	n, err := hw.UpdateNodeWithHistory(ctx, ident, fn, events)
	if err != nil {
		return n, err
	}
	w.observe(n, false)
	return n, nil
}

func (w *watched) DeleteNode(ctx context.Context, uuid string) error {
	n, getErr := w.Store.GetNode(ctx, uuid)
	if err := w.Store.DeleteNode(ctx, uuid); err != nil {
		return err
	}
	if getErr == nil {
		w.observe(n, true)
	}
	return nil
}
