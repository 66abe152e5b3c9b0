package events

import (
	"context"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// The conductor commits the nodes it holds through the watched store's
// HeldNodeWriter (store/heldnode.go); its writes are observed as
// UpdateNode's are. A watched store without one answers as one that
// reads: ReserveHeld gives no version, and UpdateHeldNode is
// UpdateNodeWithHistory.

func (w *watched) ReserveHeld(ctx context.Context, ident, conductor string) (*proto.Node, *store.HeldNode, error) {
	if hw, ok := w.Store.(store.HeldNodeWriter); ok {
		return hw.ReserveHeld(ctx, ident, conductor)
	}
	n, err := w.Store.Reserve(ctx, ident, conductor)
	return n, nil, err
}

func (w *watched) UpdateHeldNode(ctx context.Context, ident string, held *store.HeldNode, fn func(n *proto.Node) error, events []proto.HistoryEvent) (*proto.Node, *store.HeldNode, error) {
	hw, ok := w.Store.(store.HeldNodeWriter)
	if !ok {
		n, err := w.UpdateNodeWithHistory(ctx, ident, fn, events)
		return n, nil, err
	}
	n, h, err := hw.UpdateHeldNode(ctx, ident, held, fn, events)
	if err != nil {
		return n, h, err
	}
	w.observe(n, false)
	return n, h, nil
}

var _ store.HeldNodeWriter = (*watched)(nil)
