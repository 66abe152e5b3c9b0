package conductor

import (
	"sync"
	"time"
)

// wakeMargin is added to a wake's time so that the wait it ends has
// expired by then (waits expire strictly after their deadline).
const wakeMargin = 50 * time.Millisecond

// wakes holds one timer per node that asked to be looked at again (the
// decision core's Wake); the latest request replaces an earlier one.
type wakes struct {
	mu     sync.Mutex
	timers map[string]*time.Timer
}

// wakeAt queues node uuid at time at (plus wakeMargin).
func (c *Conductor) wakeAt(uuid string, at time.Time) {
	w := &c.wakes
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timers == nil {
		w.timers = map[string]*time.Timer{}
	}
	if t := w.timers[uuid]; t != nil {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(max(time.Until(at), 0)+wakeMargin, func() {
		w.mu.Lock()
		if w.timers[uuid] == t {
			delete(w.timers, uuid)
		}
		w.mu.Unlock()
		c.Notify(uuid)
	})
	w.timers[uuid] = t
}

// cancelWake drops node uuid's pending wake, if any. Every wake the
// decision core asks for ends a wait for the agent (a heartbeat or
// call-back timeout), so a pass that leaves the node outside such a wait
// cancels it: otherwise, a minute after a flow ends, each node would be
// reserved and released again for nothing, two writes per node in the
// middle of the next bulk operation.
func (c *Conductor) cancelWake(uuid string) {
	w := &c.wakes
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.timers[uuid]; t != nil {
		t.Stop()
		delete(w.timers, uuid)
	}
}

// stopWakes cancels every pending wake (the conductor is stopping).
func (c *Conductor) stopWakes() {
	w := &c.wakes
	w.mu.Lock()
	defer w.mu.Unlock()
	for uuid, t := range w.timers {
		t.Stop()
		delete(w.timers, uuid)
	}
}

// pendingWakes is how many nodes have a wake scheduled.
func (c *Conductor) pendingWakes() int {
	c.wakes.mu.Lock()
	defer c.wakes.mu.Unlock()
	return len(c.wakes.timers)
}
