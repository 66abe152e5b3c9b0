package conductor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// A pass over a node used to commit each decided change on its own: an
// agent step took four node writes (the heartbeat noted, the step
// advanced, the next one sent, the reservation released) besides the
// reservation, and the single SQLite writer was what a fleet's provide and
// deploy phases queued on. The executor now keeps decided changes on its
// copy of the node and stores them together, in one read-modify-write,
// before the next action the world can see (a BMC or agent call that
// changes something, a port created, a timer handed to the API) and at the
// end of the pass, where the same write gives back the reservation.
//
// Deferring a change across a read-only action (the agent's command list,
// its steps, a power-state read) is what a crash during that action does
// anyway: nothing outside has changed, and the next pass decides again
// from the stored node.

// pendingUpdate is a decided change not yet stored, with the time it was
// made (a state change's provision_updated_at).
type pendingUpdate struct {
	u  decide.Update
	at time.Time
}

// deferrable reports whether a may run before the changes decided so far
// are stored: it changes nothing outside this pass, or only the node's
// history, whose order against the node's writes nobody reads.
func deferrable(a decide.Action) bool {
	switch a.(type) {
	case decide.Update, decide.History, decide.Wake, decide.BuildImageArgs,
		decide.AgentCommands, decide.AgentGetSteps, decide.ReadPower, decide.ReadInventory:
		return true
	}
	return false
}

// errNotHeld ends a commit that was to release a reservation this
// conductor no longer holds (another took the node: nothing is written).
var errNotHeld = errors.New("the reservation is no longer this conductor's")

// commit stores the pending changes in one write. When the pass is over
// (f.release, from act) the same write releases the node's reservation, and
// f.n is the node as released, for the requeue check.
func (f *flow) commit(ctx context.Context) error {
	return f.store(ctx, false)
}

// finish is commit at the end of a pass.
func (f *flow) finish(ctx context.Context) error {
	return f.store(ctx, f.release)
}

func (f *flow) store(ctx context.Context, release bool) error {
	history := f.events
	f.events = nil
	if len(f.pending) == 0 {
		f.addHistory(ctx, history)
		return nil
	}
	pending := f.pending
	f.pending = nil
	if ctx.Err() != nil {
		// Stopping: the decided changes still reach the store, as
		// each did at once before; the next pass starts from them.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
	}
	me := f.c.cfg.Name
	began := time.Now()
	var goOn bool
	n, err := f.updateWithHistory(ctx, history, func(n *proto.Node) error {
		for _, p := range pending {
			if err := decide.Apply(n, p.u, p.at); err != nil && !p.u.Force {
				return err
			}
		}
		guardSecrets(n)
		goOn = false
		if release {
			if n.Reservation == nil || *n.Reservation != me {
				return errNotHeld
			}
			if goOn = f.mayGoOn && heartbeatWaiting(n) && hasWork(n); !goOn {
				n.Reservation = nil
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("update node %s: %w", f.n.UUID, err)
	}
	f.n = n
	if goOn {
		// The agent's heartbeat was recorded while this pass held the
		// node; the pass answers it now, as it already holds the node.
		f.goOn = true
		f.c.seenSince(f.n.UUID, began) // the heartbeat's request to be looked at is served
		return nil
	}
	f.released = release
	if release {
		f.releaseRead = began
	}
	return nil
}

// A heartbeat that arrives while a pass holds its node — the agent
// finished the command the pass just sent, and beat at once, as
// ironic-python-agent does — is recorded by the API, which asks for the
// node to be looked at again. The pass used to release the node and a
// worker to reserve it again: two writes behind the store's single
// writer and a turn in the queue, on the path from the heartbeat to the
// agent's next command. The write that was to release the node now sees
// the heartbeat (the API's write makes the held commit read the node
// again) and keeps the reservation instead; the pass goes on with another
// round of decisions. Rounds are bounded (maxRounds): a pass still ends
// and another queued node gets the worker.

// heartbeatWaiting reports whether n holds an agent heartbeat the
// conductor has not acted on.
func heartbeatWaiting(n *proto.Node) bool {
	fs, _ := flowstate.Read(n, flowstate.PartWork)
	return !fs.HeartbeatPending.IsZero()
}

// requeue queues a node released with work left, as releaseAndRequeue
// does: a heartbeat that came while the node was held (its agent finished
// a command at once) keeps its place ahead.
func (c *Conductor) requeue(n *proto.Node) {
	if heartbeatWaiting(n) {
		c.NotifyAgent(n.UUID)
	} else {
		c.Notify(n.UUID)
	}
}

// History is recorded with the pass's writes. Each event used to be a
// write of its own (AddHistory: a transaction reading the node and
// inserting the event), two or more per node in each phase of a fleet's
// life; now the events a pass records between two commits are inserted in
// the next commit's transaction (store.NodeHistoryWriter), as the node
// stood before that commit, which is what AddHistory saw when the event
// was recorded: decided changes are not stored before it either. A crash
// before the commit loses the events with the changes they went with;
// the pass that redoes the changes records them again. Events left with
// no change to commit are added on their own, as before.

// deferHistory keeps ev for the next commit when the store can write
// them together; false: record it now.
func (f *flow) deferHistory(ev proto.HistoryEvent) bool {
	if _, ok := f.c.st.(store.NodeHistoryWriter); !ok {
		return false
	}
	// Fixed now, not at each try of the commit's update.
	ev.UUID = uuid.NewString()
	ev.CreatedAt = &proto.Time{Time: time.Now().UTC().Truncate(time.Microsecond)}
	f.events = append(f.events, ev)
	return true
}

// updateWithHistory is UpdateNode storing history with the update, from
// the version of the node the pass holds when the store keeps one.
func (f *flow) updateWithHistory(ctx context.Context, history []proto.HistoryEvent, fn func(n *proto.Node) error) (*proto.Node, error) {
	if hw, ok := f.c.st.(store.HeldNodeWriter); ok {
		n, held, err := hw.UpdateHeldNode(ctx, f.n.UUID, f.held, fn, history)
		f.held = held
		return n, err
	}
	if hw, ok := f.c.st.(store.NodeHistoryWriter); ok && len(history) > 0 {
		return hw.UpdateNodeWithHistory(ctx, f.n.UUID, fn, history)
	}
	return f.c.st.UpdateNode(ctx, f.n.UUID, fn)
}

// addHistory records events with no update to go with.
func (f *flow) addHistory(ctx context.Context, events []proto.HistoryEvent) {
	for _, ev := range events {
		if err := f.c.st.AddHistory(ctx, f.n.UUID, ev); err != nil {
			f.c.log.Warn("record history", "node", f.n.UUID, "err", err)
		}
	}
}

// reserve takes node uuid's reservation, with the version reserved when
// the store keeps one (store.HeldNodeWriter): the pass's commits then
// write without reading the node again.
func (c *Conductor) reserve(ctx context.Context, uuid string) (*proto.Node, *store.HeldNode, error) {
	if hw, ok := c.st.(store.HeldNodeWriter); ok {
		return hw.ReserveHeld(ctx, uuid, c.cfg.Name)
	}
	n, err := c.st.Reserve(ctx, uuid, c.cfg.Name)
	return n, nil, err
}
