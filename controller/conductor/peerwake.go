package conductor

import (
	"context"
	"strings"
	"time"

	"github.com/kilnhq/kiln/controller/store"
)

// Wake-ups between controllers. The API of any controller records a request
// or an agent heartbeat and calls Notify or NotifyAgent; when the node's
// owner is another controller, the wake-up is forwarded to it through the
// store's Waker (PostgreSQL NOTIFY on a channel per conductor), so that the
// owner acts at once instead of at its next scan. The scan stays the safety
// net: a wake-up lost on the way costs only the old delay.

// peerWake is one wake-up for node UUID, for conductor owner.
type peerWake struct {
	owner, uuid string
	lane        lane
}

// peerWakeBatch bounds the wake-ups one forwarding round takes.
const peerWakeBatch = 2048

// ownerOf is the conductor the ring gives uuid to.
func (c *Conductor) ownerOf(uuid string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ring.Owner(uuid)
}

// forward queues a wake-up of uuid for its owner, if it is another
// conductor and the store carries wake-ups. A full queue drops it: the
// owner's scan finds the node.
func (c *Conductor) forward(uuid string, l lane) {
	if c.cfg.Peers == nil {
		return
	}
	owner := c.ownerOf(uuid)
	if owner == "" || owner == c.cfg.Name {
		return
	}
	select {
	case c.peerWakes <- peerWake{owner: owner, uuid: uuid, lane: l}:
	default:
		c.peerWakesDropped.Add(1)
	}
}

// forwardLoop sends queued wake-ups, as many as are waiting in one
// notification per owner (and payload size).
func (c *Conductor) forwardLoop(ctx context.Context) {
	for {
		var first peerWake
		select {
		case <-ctx.Done():
			return
		case first = <-c.peerWakes:
		}
		byOwner := map[string]*strings.Builder{}
		add := func(w peerWake) {
			b := byOwner[w.owner]
			if b == nil {
				b = &strings.Builder{}
				byOwner[w.owner] = b
			}
			if b.Len()+len(w.uuid)+2 > store.WakePayloadMax {
				c.sendWake(ctx, w.owner, b.String())
				b.Reset()
			}
			b.WriteString(encodeWake(w))
		}
		add(first)
	drain:
		for range peerWakeBatch - 1 {
			select {
			case w := <-c.peerWakes:
				add(w)
			default:
				break drain
			}
		}
		for owner, b := range byOwner {
			c.sendWake(ctx, owner, b.String())
		}
	}
}

func (c *Conductor) sendWake(ctx context.Context, owner, payload string) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.cfg.Peers.Wake(wctx, owner, payload); err != nil && ctx.Err() == nil {
		c.log.Warn("wake peer conductor", "conductor", owner, "err", err)
		return
	}
	c.peerWakesSent.Add(1)
}

// encodeWake is one line of a payload: the lane ('a' agent, 'w' work),
// then the node's UUID.
func encodeWake(w peerWake) string {
	if w.lane == laneAgent {
		return "a" + w.uuid + "\n"
	}
	return "w" + w.uuid + "\n"
}

// decodeWakes calls f with each well-formed line of payload; others are
// skipped (a payload is never trusted to be ours alone).
func decodeWakes(payload string, f func(uuid string, l lane)) {
	for line := range strings.SplitSeq(payload, "\n") {
		if len(line) < 2 || len(line) > 65 {
			continue
		}
		switch line[0] {
		case 'a':
			f(line[1:], laneAgent)
		case 'w':
			f(line[1:], laneWork)
		}
	}
}

// listenLoop takes the wake-ups peers send to this conductor, listening
// again after a failure. Each time listening (re)starts, a scan finds what
// was sent while nobody listened.
func (c *Conductor) listenLoop(ctx context.Context) {
	for {
		err := c.cfg.Peers.Listen(ctx, c.cfg.Name, func() {
			c.scan(ctx)
			c.log.Info("listening for wake-ups from peer conductors")
		}, func(payload string) {
			decodeWakes(payload, func(uuid string, l lane) {
				// Only nodes this conductor owns: a wake-up is never
				// forwarded twice, so rings that disagree for a moment
				// cannot bounce one between conductors.
				if c.owns(uuid) {
					c.peerWakesReceived.Add(1)
					c.enqueue(uuid, l)
				}
			})
		})
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("listen for peer wake-ups; the scan covers the gap", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// PeerWakes returns how many wake-ups this conductor sent to peers (in
// notifications), received from them for nodes it owns, and dropped.
func (c *Conductor) PeerWakes() (sent, received, dropped uint64) {
	return c.peerWakesSent.Load(), c.peerWakesReceived.Load(), c.peerWakesDropped.Load()
}
