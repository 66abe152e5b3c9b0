package conductor

import "sync"

// agentBeats carries agent heartbeats to the passes that wait on one of
// their agent's commands (agentclient.WaitCommand). An agent heartbeats
// as soon as an asynchronous command ends, so the pass looks at the
// command then instead of at its next poll (the first comes after 100 ms).
// Only the heartbeats this process's API receives arrive here: with
// several controllers, a pass may still wait for its poll.
type agentBeats struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

// listen returns the channel node uuid's heartbeats signal from now on,
// holding one signal at most, until stop.
func (b *agentBeats) listen(uuid string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = map[string]chan struct{}{}
	}
	ch := make(chan struct{}, 1)
	b.ch[uuid] = ch
	return ch
}

// stop ends listening for node uuid's heartbeats.
func (b *agentBeats) stop(uuid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.ch, uuid)
}

// beat signals node uuid's listener, if there is one.
func (b *agentBeats) beat(uuid string) {
	b.mu.Lock()
	ch := b.ch[uuid]
	b.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default: // one pending signal says it all
		}
	}
}

// AgentHeartbeated tells the conductor that node uuid's agent heartbeated
// (the API accepted the heartbeat, whether or not there is work to act
// on): a pass waiting on one of the agent's commands looks at it now.
func (c *Conductor) AgentHeartbeated(uuid string) { c.beats.beat(uuid) }
