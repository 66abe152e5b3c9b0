package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/events"
)

// eventsKeepalive is how often an idle event stream sends a comment, so
// proxies and clients see the connection alive.
const eventsKeepalive = 15 * time.Second

// eventsWriteTimeout disconnects a client that stops reading: its buffered
// events are dropped meanwhile, never the publisher slowed.
const eventsWriteTimeout = 30 * time.Second

// streamEvents serves GET /v1/events (a Kiln extension): node changes as
// server-sent events, "event: node" with an events.Event as data, optionally
// only for ?node=<uuid|name> (repeatable or comma-separated). With a node
// filter, the current state of each named node is sent first. When the
// client fell behind and events were dropped, an "event: lost" with
// {"dropped": N} says so; the client should re-read the nodes it follows.
func (s *Server) streamEvents(c echo.Context) error {
	var idents []string
	for _, v := range c.QueryParams()["node"] {
		for id := range strings.SplitSeq(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				idents = append(idents, id)
			}
		}
	}
	sub := s.events.Subscribe(func(e events.Event) bool { return e.Matches(idents) }, events.DefaultBuffer)
	defer sub.Close()

	// Subscribed before the snapshot is read, so no change falls between.
	var snapshot []events.Event
	for _, id := range idents {
		n, err := s.store.GetNode(c.Request().Context(), id)
		if err != nil {
			return s.storeError(err, "Node", id)
		}
		snapshot = append(snapshot, events.FromNode(n))
	}

	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w.Writer)
	send := func(kind string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if _, err := fmt.Fprint(w, ": kiln events\n\n"); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil
	}
	for _, e := range snapshot {
		if err := send("node", e); err != nil {
			return nil
		}
	}
	tick := time.NewTicker(eventsKeepalive)
	defer tick.Stop()
	ctx := c.Request().Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			_ = rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
		case e, ok := <-sub.Events():
			if !ok {
				return nil // the bus closed: the server is shutting down
			}
			if d := sub.TakeDropped(); d > 0 {
				if err := send("lost", map[string]uint64{"dropped": d}); err != nil {
					return nil
				}
			}
			if err := send("node", e); err != nil {
				return nil
			}
		}
	}
}
