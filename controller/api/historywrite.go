package api

import (
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// updateRecording is updateUnlocked for a request that records an event in
// the node's history once the change is made: fn changes the node and
// names the event. Where the store can (store.NodeHistoryWriter) the event
// is stored in the update's own write; a separate AddHistory was the
// second write of every provision request, behind the same single SQLite
// writer. The event records the node as fn leaves it, as AddHistory right
// after the update did.
func (s *Server) updateRecording(c echo.Context, ident, severity string, fn func(n *proto.Node) (string, error)) (*proto.Node, error) {
	ctx := c.Request().Context()
	hw, ok := s.store.(store.NodeHistoryWriter)
	if !ok {
		var event string
		n, err := s.updateUnlocked(ctx, ident, func(n *proto.Node) (err error) {
			event, err = fn(n)
			return err
		})
		if err == nil {
			s.history(c, n.UUID, severity, event)
		}
		return n, err
	}
	ev := []proto.HistoryEvent{{UUID: uuid.NewString(), Severity: severity, EventType: "api", Conductor: s.conductor}}
	record := func(n *proto.Node) error {
		event, err := fn(n)
		if err != nil {
			return err
		}
		ev[0] = afterUpdate(ev[0], n, secrets.Scrub(event), s.now())
		return nil
	}
	// One write: a client that hangs up cancels both or neither.
	return s.untilUnlocked(ctx, func() (*proto.Node, error) {
		return hw.UpdateNodeWithHistory(ctx, ident, record, ev)
	})
}

// afterUpdate is ev, named event, recording n (the node as updated) at
// now: its provision state and target, and the seconds since its last
// provision change, as AddHistory records them.
func afterUpdate(ev proto.HistoryEvent, n *proto.Node, event string, now time.Time) proto.HistoryEvent {
	ev.Event = event
	ev.CreatedAt = &proto.Time{Time: now.UTC().Truncate(time.Microsecond)}
	ev.State = string(n.ProvisionState)
	ev.TargetProvisionState = nil
	if t := n.TargetProvisionState; t != nil {
		target := string(*t)
		ev.TargetProvisionState = &target
	}
	ev.DurationSeconds = nil
	if u := n.ProvisionUpdatedAt; u != nil {
		d := (ev.CreatedAt.UnixMicro() - u.UnixMicro()) / 1_000_000
		ev.DurationSeconds = &d
	}
	return ev
}
