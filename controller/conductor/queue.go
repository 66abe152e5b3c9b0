package conductor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/controller/store"
)

// lane is where a node waits to be looked at.
type lane uint8

const (
	laneNone lane = iota
	// laneWork: a request, a wake, a scan's find; first come, first served.
	laneWork
	// laneAgent: an agent heartbeated and waits for its next command. The
	// workers take these first, so that an agent's turn-around does not
	// wait behind a bulk operation's thousands of queued nodes.
	laneAgent
)

// Notify asks for node uuid to be looked at now (a request was recorded).
// A node owned by another conductor is left to it, woken through the
// store where it carries wake-ups (peerwake.go).
func (c *Conductor) Notify(uuid string) {
	if c.owns(uuid) {
		c.enqueue(uuid, laneWork)
	} else {
		c.forward(uuid, laneWork)
	}
}

// NotifyAgent is Notify for an agent heartbeat the conductor must act on:
// the node goes ahead of other queued work.
func (c *Conductor) NotifyAgent(uuid string) {
	if c.owns(uuid) {
		c.enqueue(uuid, laneAgent)
	} else {
		c.forward(uuid, laneAgent)
	}
}

// enqueue queues uuid in lane l, unless it already waits there or in a
// faster lane. A node moved from the work lane to the agent lane leaves a
// stale entry behind, which next skips.
//
// A node one of this conductor's workers is acting on is not queued: a
// second worker would only find it reserved, at the price of a write (a
// reservation attempt goes through the store's writer). Its agent
// typically heartbeats within milliseconds of the command the pass just
// sent, while the pass still stores its changes. The request is noted
// instead, and the worker queues the node once its pass is over (done).
func (c *Conductor) enqueue(uuid string, l lane) {
	c.mu.Lock()
	if again, ok := c.busy[uuid]; ok {
		c.busy[uuid] = askedAgain{lane: max(again.lane, l), at: time.Now()}
		if w := c.awaited[uuid]; w != nil && l == laneAgent {
			w.Store(true) // the agent waits on the pass now (worker)
		}
		c.mu.Unlock()
		return
	}
	prev := c.queued[uuid]
	if prev >= l {
		c.mu.Unlock()
		return
	}
	c.queued[uuid] = l
	if prev == laneNone || l == laneAgent {
		c.queuedAt[uuid] = time.Now() // an agent's wait starts at its heartbeat
	}
	c.mu.Unlock()
	ch := c.queue
	if l == laneAgent {
		ch = c.agents
	}
	select {
	case ch <- uuid:
	default:
		// The lane is full; the node keeps its earlier place, if any, and
		// the next scan finds it again.
		c.mu.Lock()
		if prev == laneNone {
			delete(c.queued, uuid)
			delete(c.queuedAt, uuid)
		} else {
			c.queued[uuid] = prev
		}
		c.mu.Unlock()
	}
}

// next returns the next node to look at, agents first, then other work,
// with the lane it came from; false when ctx ends. A node from the work
// lane comes with a place (places.go): one worker at a time, the one
// holding the turn, waits for the next such node and for a free place,
// while the others stay free for agents.
func (c *Conductor) next(ctx context.Context) (string, lane, bool) { return c.nextOf(ctx, c.turn) }

// nextAgent is next for the agent lane alone.
func (c *Conductor) nextAgent(ctx context.Context) (string, lane, bool) { return c.nextOf(ctx, nil) }

// nextOf is next, the work lane left out when turn is nil.
func (c *Conductor) nextOf(ctx context.Context, turn chan struct{}) (string, lane, bool) {
	for {
		select {
		case uuid := <-c.agents:
			if c.take(uuid, laneAgent) {
				return uuid, laneAgent, true
			}
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return "", laneNone, false
		case uuid := <-c.agents:
			if c.take(uuid, laneAgent) {
				return uuid, laneAgent, true
			}
		case <-turn:
			uuid, ok := c.nextWork(ctx)
			turn <- struct{}{}
			if !ok {
				return "", laneNone, false // nextWork ends only with ctx
			}
			return uuid, laneWork, true
		}
	}
}

// take makes uuid, received from lane from, busy; false when the entry
// is stale (the node moved to the agent lane, and may have been looked
// at already).
func (c *Conductor) take(uuid string, from lane) bool {
	c.mu.Lock()
	if c.queued[uuid] != from {
		c.mu.Unlock()
		return false
	}
	delete(c.queued, uuid)
	c.busy[uuid] = askedAgain{}
	at := c.queuedAt[uuid]
	delete(c.queuedAt, uuid)
	c.mu.Unlock()
	c.waits.queued(from, at)
	return true
}

// askedAgain is a busy node's request to be looked at again: the
// fastest lane asked for, and when it was last asked.
type askedAgain struct {
	lane lane
	at   time.Time
}

// seenSince drops busy node uuid's requests made before since, when the
// pass read the node at since or later to release it: what those
// requests announced (a write the API committed before notifying) is in
// the node the pass released, whose own check queues the node again if
// work is left. Otherwise a pass that consumed, say, inspection data
// delivered while it held the node would be followed by one that finds
// nothing to do, at the price of two writes.
func (c *Conductor) seenSince(uuid string, since time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.busy[uuid]; ok && a.lane != laneNone && a.at.Before(since) {
		c.busy[uuid] = askedAgain{}
	}
}

// foundByScan queues node uuid, which a scan that began at since found
// with work, unless that finding is already stale: a worker holds the
// node (its pass ends by queueing it again if work is left, from the node
// as it released it, which is newer than what the scan read), or a
// worker finished with it after the scan read it. Either way the node
// would be reserved and released for nothing, two writes.
func (c *Conductor) foundByScan(uuid string, since time.Time) {
	c.mu.Lock()
	_, busy := c.busy[uuid]
	stale := busy || c.passEnded[uuid].After(since)
	c.mu.Unlock()
	if !stale {
		c.enqueue(uuid, laneWork)
	}
}

// forgetPassesBefore drops the pass ends no scan still needs: those
// before the latest scan began.
func (c *Conductor) forgetPassesBefore(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for u, at := range c.passEnded {
		if at.Before(t) {
			delete(c.passEnded, u)
		}
	}
}

// done ends a worker's turn on uuid (which next or nextAgent gave it),
// gives back its place if it holds one, and queues the node again if it
// was asked for meanwhile.
func (c *Conductor) done(uuid string) {
	c.mu.Lock()
	again := c.busy[uuid]
	delete(c.busy, uuid)
	c.passEnded[uuid] = time.Now()
	p := c.placed[uuid]
	delete(c.placed, uuid)
	c.mu.Unlock()
	p.leave()
	if again.lane != laneNone {
		c.enqueue(uuid, again.lane)
	}
}

// worker acts on the nodes next gives it. A pass for an agent that
// heartbeated writes ahead of bulk work (store.Urgent): the agent idles
// until the pass sends its next command. So does a pass from the work
// lane from the moment its node's agent heartbeats (enqueue): a machine
// the pass powered on boots its agent at once, whose first heartbeat
// then waits for the pass's last writes.
func (c *Conductor) worker(ctx context.Context, next func(context.Context) (string, lane, bool)) {
	urgent := store.Urgent(ctx)
	for {
		uuid, from, ok := next(ctx)
		if !ok {
			return
		}
		if from == laneAgent {
			c.process(urgent, uuid)
		} else {
			awaited := new(atomic.Bool)
			c.mu.Lock()
			c.awaited[uuid] = awaited
			p := c.placed[uuid]
			c.mu.Unlock()
			if p != nil {
				p.awaited = awaited
			}
			c.process(withPlace(store.UrgentOnce(ctx, awaited), p), uuid)
			c.mu.Lock()
			delete(c.awaited, uuid)
			c.mu.Unlock()
		}
		c.done(uuid)
	}
}
