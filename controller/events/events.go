// Package events carries node changes — provision and power state, the
// running step and its progress — from the controller's write path to
// whoever watches: the GET /v1/events stream, the CLI's --wait, metrics.
//
// Publishing never blocks: each subscriber has a bounded buffer and, when a
// subscriber falls behind, its oldest events are dropped and counted, so a
// slow client can never slow the conductor or the API.
package events

import (
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// Progress is how far the running step has come (a Kiln extension; Ironic
// has no such field, its clients ignore it).
type Progress = flowstate.Progress

// Event is one node change, as GET /v1/events sends it (event: node).
type Event struct {
	UUID                 string                `json:"uuid"`
	Name                 *string               `json:"name"`
	ProvisionState       proto.ProvisionState  `json:"provision_state"`
	TargetProvisionState *proto.ProvisionState `json:"target_provision_state"`
	PowerState           *proto.PowerState     `json:"power_state"`
	TargetPowerState     *proto.PowerState     `json:"target_power_state"`
	LastError            *string               `json:"last_error"`
	Maintenance          bool                  `json:"maintenance"`
	// Step is the running clean, deploy or service step, "interface.step".
	Step     string    `json:"step,omitempty"`
	Progress *Progress `json:"progress,omitempty"`
	// Deleted is set on the last event of a deleted node.
	Deleted bool      `json:"deleted,omitempty"`
	Time    time.Time `json:"time"`
}

// FromNode summarizes n as an event stamped now.
func FromNode(n *proto.Node) Event {
	// Copies, so that the event shares nothing with a node its owner may change.
	return Event{
		UUID: n.UUID, Name: clone(n.Name), ProvisionState: n.ProvisionState, TargetProvisionState: clone(n.TargetProvisionState),
		PowerState: clone(n.PowerState), TargetPowerState: clone(n.TargetPowerState), LastError: scrubbed(n.LastError),
		Maintenance: n.Maintenance, Step: StepOf(n), Progress: ProgressOf(n), Time: time.Now().UTC(),
	}
}

// scrubbed is a scrubbed copy of a last_error (see secrets.Scrub).
func scrubbed(p *string) *string {
	if p == nil {
		return nil
	}
	s := secrets.Scrub(*p)
	return &s
}

func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// StepOf names the node's running step, "interface.step", or "".
func StepOf(n *proto.Node) string {
	for _, d := range []proto.Dict{n.DeployStep, n.CleanStep, n.ServiceStep} {
		step, _ := d["step"].(string)
		if step == "" {
			continue
		}
		iface, _ := d["interface"].(string)
		return iface + "." + step
	}
	return ""
}

// ProgressOf reads the progress the conductor recorded, nil if none.
func ProgressOf(n *proto.Node) *Progress {
	fs, _ := flowstate.Read(n, flowstate.PartProgress)
	return fs.Progress
}

// same reports whether two events of one node show the same thing (time aside).
func same(a, b Event) bool {
	eq := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqP := func(x, y *proto.ProvisionState) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqW := func(x, y *proto.PowerState) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqG := func(x, y *Progress) bool {
		return (x == nil) == (y == nil) && (x == nil || (x.Step == y.Step && x.BytesDone == y.BytesDone && x.BytesTotal == y.BytesTotal && x.Stage == y.Stage))
	}
	return a.UUID == b.UUID && eq(a.Name, b.Name) && a.ProvisionState == b.ProvisionState &&
		eqP(a.TargetProvisionState, b.TargetProvisionState) && eqW(a.PowerState, b.PowerState) &&
		eqW(a.TargetPowerState, b.TargetPowerState) && eq(a.LastError, b.LastError) &&
		a.Maintenance == b.Maintenance && a.Step == b.Step && eqG(a.Progress, b.Progress) && a.Deleted == b.Deleted
}

// Matches reports whether e concerns one of idents (UUIDs or names); an
// empty list matches every node.
func (e Event) Matches(idents []string) bool {
	if len(idents) == 0 {
		return true
	}
	for _, id := range idents {
		if strings.EqualFold(id, e.UUID) || (e.Name != nil && *e.Name == id) {
			return true
		}
	}
	return false
}

// DefaultBuffer is the per-subscriber buffer when Subscribe is given none.
const DefaultBuffer = 256

// Bus fans events out to subscribers. The zero value is not usable; use NewBus.
type Bus struct {
	mu     sync.RWMutex
	subs   map[*Subscription]struct{}
	closed bool
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Publish hands e to every subscriber whose filter accepts it. It never
// blocks: a full subscriber loses its oldest event instead.
func (b *Bus) Publish(e Event) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for s := range b.subs {
		if s.match == nil || s.match(e) {
			s.offer(e)
		}
	}
}

// Subscribe registers a subscriber that receives the events match accepts
// (every event if match is nil), buffering up to buffer of them. If the bus
// is closed the subscription's channel is closed at once.
func (b *Bus) Subscribe(match func(Event) bool, buffer int) *Subscription {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	s := &Subscription{bus: b, match: match, ch: make(chan Event, buffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.ch)
		s.done = true
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// Subscribers is the number of live subscriptions.
func (b *Bus) Subscribers() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.subs)
}

// Close ends every subscription (their channels close) and refuses new
// ones; streams end, so an HTTP server can shut down.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		s.end()
		delete(b.subs, s)
	}
}

// Subscription is one subscriber's bounded queue.
type Subscription struct {
	bus   *Bus
	match func(Event) bool
	ch    chan Event

	mu      sync.Mutex
	dropped uint64
	done    bool
}

// Events delivers the subscriber's events; it is closed when the
// subscription or the bus is closed.
func (s *Subscription) Events() <-chan Event { return s.ch }

// TakeDropped returns how many events were dropped since the last call
// because the subscriber fell behind, and resets the count.
func (s *Subscription) TakeDropped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dropped
	s.dropped = 0
	return d
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	if _, ok := s.bus.subs[s]; ok {
		delete(s.bus.subs, s)
		s.end()
	}
}

func (s *Subscription) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		close(s.ch)
	}
}

// offer queues e, dropping the oldest queued event when the buffer is full.
func (s *Subscription) offer(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	for {
		select {
		case s.ch <- e:
			return
		default:
		}
		select {
		case <-s.ch:
			s.dropped++
		default:
		}
	}
}
