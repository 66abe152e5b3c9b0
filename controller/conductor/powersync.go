package conductor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gouuid "github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// bmcCheckRefresh is how often an unchanged, successful BMC check is
// rewritten: every power-sync round would otherwise write every node.
const bmcCheckRefresh = 10 * time.Minute

// powerSync reads the power state of owned stable nodes back from their
// BMCs, so that a machine switched on or off behind Kiln's back shows its
// real state. A round runs on a bounded pool of workers, never on the
// conductor's liveness or scan goroutines; the nodes behind one BMC are
// read one at a time with PowerSyncBMCInterval between them; a round stops
// starting calls when its budget is spent, and the nodes it did not reach
// go first in the next round.
type powerSync struct {
	c   *Conductor
	now func() time.Time

	mu       sync.Mutex
	missed   map[string]bool      // node UUIDs the last round did not reach
	lastCall map[string]time.Time // BMC key → start of the last call to it
}

func newPowerSync(c *Conductor) *powerSync {
	return &powerSync{c: c, now: time.Now, missed: map[string]bool{}, lastCall: map[string]time.Time{}}
}

// loop runs a round every PowerSyncInterval; a round that overruns delays
// the next rather than overlapping it.
func (p *powerSync) loop(ctx context.Context) {
	every(ctx, p.c.cfg.PowerSyncInterval, func(ctx context.Context) { p.round(ctx) })
}

// roundResult is what one round did.
type roundResult struct {
	Candidates int // owned stable nodes due a read
	Reached    int // nodes whose BMC was asked (or which were busy and skipped)
	Missed     int // nodes left for the next round by the budget
}

// syncTarget is a node a round reads: its UUID and its BMC's key.
type syncTarget struct {
	UUID string
	bmc  string
}

// bmcBatch is the nodes of one round behind one BMC, read in order.
type bmcBatch struct {
	key   string
	nodes []syncTarget
}

// bmcKey names the BMC that answers for node uuid, from its driver_info
// addresses (store.PowerSyncAddressKeys), so that nodes sharing one (a
// chassis manager, a simulator) are paced together. Without an address
// each node is its own BMC.
func bmcKey(uuid string, addrs [3]string) string {
	for i, a := range addrs {
		if a = strings.TrimSpace(a); a != "" {
			return store.PowerSyncAddressKeys[i] + "=" + strings.ToLower(a)
		}
	}
	return "node=" + uuid
}

// planRound groups nodes by BMC, keeping their order, and puts first the
// BMCs that hold a node the previous round missed.
func planRound(nodes []syncTarget, missed map[string]bool) []bmcBatch {
	idx := map[string]int{}
	var batches []bmcBatch
	first := map[string]bool{}
	for _, n := range nodes {
		k := n.bmc
		i, ok := idx[k]
		if !ok {
			i = len(batches)
			idx[k] = i
			batches = append(batches, bmcBatch{key: k})
		}
		batches[i].nodes = append(batches[i].nodes, n)
		if missed[n.UUID] {
			first[k] = true
		}
	}
	out := make([]bmcBatch, 0, len(batches))
	for _, b := range batches {
		if first[b.key] {
			// Within the BMC too, the missed nodes go first.
			var head, tail []syncTarget
			for _, n := range b.nodes {
				if missed[n.UUID] {
					head = append(head, n)
				} else {
					tail = append(tail, n)
				}
			}
			out = append(out, bmcBatch{key: b.key, nodes: append(head, tail...)})
		}
	}
	for _, b := range batches {
		if !first[b.key] {
			out = append(out, b)
		}
	}
	return out
}

// syncDue reports whether n is one of ours and settled enough for its
// power state to be read back.
func (c *Conductor) syncDue(n *proto.Node) bool {
	if !c.ownsNode(n) || n.Maintenance || !state.IsStable(n.ProvisionState) || n.TargetPowerState != nil {
		return false
	}
	if hasWork(n) {
		return false // the flow about to run reads or sets the power itself
	}
	// Enrolled nodes' credentials are not verified yet.
	return !(n.PowerState == nil && n.ProvisionState == proto.StateEnroll)
}

// due lists the nodes a round reads: syncDue's test on what the store
// selects by column, no node decoded. syncNode tests the node itself
// again under its reservation.
func (p *powerSync) due(ctx context.Context) ([]syncTarget, error) {
	c := p.c
	rows, err := c.st.PowerSyncNodes(ctx, c.cfg.Group)
	if err != nil {
		return nil, err
	}
	var due []syncTarget
	for _, r := range rows {
		if !state.IsStable(r.ProvisionState) || (r.PowerState == "" && r.ProvisionState == proto.StateEnroll) || !c.owns(r.UUID) {
			continue
		}
		due = append(due, syncTarget{UUID: r.UUID, bmc: bmcKey(r.UUID, r.BMC)})
	}
	return due, nil
}

// round reads back the power state of every due node, within the budget.
func (p *powerSync) round(ctx context.Context) roundResult {
	c := p.c
	due, err := p.due(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("power state sync: list nodes", "err", err)
		}
		return roundResult{}
	}
	p.mu.Lock()
	plan := planRound(due, p.missed)
	p.mu.Unlock()

	deadline := p.now().Add(c.cfg.PowerSyncBudget)
	batches := make(chan bmcBatch)
	var (
		mu      sync.Mutex
		missed  = map[string]bool{}
		reached int
		wg      sync.WaitGroup
	)
	for range min(c.cfg.PowerSyncWorkers, len(plan)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				for i, n := range b.nodes {
					if ctx.Err() != nil || !p.now().Before(deadline) {
						mu.Lock()
						for _, m := range b.nodes[i:] {
							missed[m.UUID] = true
						}
						mu.Unlock()
						break
					}
					if !p.pace(ctx, b.key) {
						continue
					}
					p.syncNode(ctx, n.UUID)
					mu.Lock()
					reached++
					mu.Unlock()
				}
			}
		}()
	}
	for _, b := range plan {
		batches <- b
	}
	close(batches)
	wg.Wait()

	p.mu.Lock()
	p.missed = missed
	p.mu.Unlock()
	if len(missed) > 0 && ctx.Err() == nil {
		c.log.Warn("power state sync: round budget spent; the nodes not reached go first next round",
			"budget", c.cfg.PowerSyncBudget, "reached", reached, "missed", len(missed))
	}
	return roundResult{Candidates: len(due), Reached: reached, Missed: len(missed)}
}

// pace waits until PowerSyncBMCInterval has passed since the last call to
// BMC key, then records this one; false when ctx ended first.
func (p *powerSync) pace(ctx context.Context, key string) bool {
	gap := p.c.cfg.PowerSyncBMCInterval
	p.mu.Lock()
	last, seen := p.lastCall[key]
	p.mu.Unlock()
	if gap > 0 && seen {
		if wait := last.Add(gap).Sub(p.now()); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		}
	}
	p.mu.Lock()
	p.lastCall[key] = p.now()
	p.mu.Unlock()
	return true
}

// syncNode reads one node's power state under its reservation, records
// what the BMC said (the state when it changed, and the check itself for
// GET …/validate) and releases the node.
func (p *powerSync) syncNode(ctx context.Context, uuid string) {
	c := p.c
	n, err := c.st.Reserve(ctx, uuid, c.cfg.Name)
	if err != nil {
		if !errors.Is(err, store.ErrLocked) && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			c.log.Warn("power state sync: reserve node", "node", uuid, "err", err)
		}
		return // busy: whoever holds it is acting on the node
	}
	defer c.releaseAndRequeue(ctx, uuid)
	if !c.syncDue(n) {
		return
	}
	ifs, err := driver.Resolve(n)
	if err != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.PowerSyncCallTimeout)
	ps, err := ifs.Power.GetPowerState(cctx, n)
	cancel()
	if ctx.Err() != nil {
		return
	}
	check := proto.BMCCheck{At: p.now(), Operation: "power state"}
	if err != nil {
		check.Error = secrets.Scrub(err.Error())
		c.log.Warn("power state sync", "node", uuid, "err", err)
	}
	changed := err == nil && (n.PowerState == nil || *n.PowerState != ps)
	if !changed && !checkWorthRecording(n, check) {
		return
	}
	record := func(cur *proto.Node) error {
		flowstate.Write(cur, flowstate.State{LastBMCCheck: &check}, flowstate.PartBMC)
		if changed && cur.TargetPowerState == nil {
			cur.PowerState = &ps
		}
		return nil
	}
	var ev *proto.HistoryEvent
	if changed {
		ev = &proto.HistoryEvent{Severity: "WARNING", EventType: "power_sync", Conductor: c.cfg.Name,
			Event: fmt.Sprintf("Power state of node %s is %s according to its BMC", uuid, ps)}
	}
	// The new power state and the event that explains it are one write
	// where the store can: a reader never sees the one without the other.
	hw, together := c.st.(store.NodeHistoryWriter)
	var uerr error
	if together && ev != nil {
		ev.UUID = gouuid.NewString()
		ev.CreatedAt = &proto.Time{Time: time.Now().UTC().Truncate(time.Microsecond)}
		_, uerr = hw.UpdateNodeWithHistory(ctx, uuid, record, []proto.HistoryEvent{*ev})
	} else {
		_, uerr = c.st.UpdateNode(ctx, uuid, record)
	}
	if uerr != nil {
		if ctx.Err() == nil {
			c.log.Warn("power state sync: record", "node", uuid, "err", uerr)
		}
		return
	}
	if changed {
		c.log.Info("power state changed outside Kiln", "node", uuid, "power_state", ps)
		if !together {
			_ = c.st.AddHistory(ctx, uuid, *ev)
		}
	}
}

// checkWorthRecording reports whether check should replace the one stored
// in n: its outcome differs, or the stored one is old.
func checkWorthRecording(n *proto.Node, check proto.BMCCheck) bool {
	fs, _ := flowstate.Read(n, flowstate.PartBMC)
	prev := fs.LastBMCCheck
	return prev == nil || prev.Error != check.Error || check.At.Sub(prev.At) >= bmcCheckRefresh
}

// releaseAndRequeue releases a node this conductor reserved, even when ctx
// is done, and queues it when work arrived meanwhile (a heartbeat).
//
// A reservation that is not released blocks the node (409 NodeLocked)
// until this conductor restarts or is declared dead, so a release that
// fails — a database too busy to begin a transaction within the timeout,
// seen at load 45 on 2 cores — is tried again with longer timeouts.
func (c *Conductor) releaseAndRequeue(ctx context.Context, uuid string) {
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(context.Background(), time.Duration(attempt)*10*time.Second)
		err := c.st.Release(rctx, uuid, c.cfg.Name)
		if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotReserved) {
			if fresh, err := c.st.GetNode(rctx, uuid); err == nil && fresh.Reservation == nil && hasWork(fresh) && ctx.Err() == nil {
				// A heartbeat that came while the node was held (its agent
				// finished a command at once) keeps its place ahead.
				if fs, _ := flowstate.Read(fresh, flowstate.PartWork); !fs.HeartbeatPending.IsZero() {
					c.NotifyAgent(uuid)
				} else {
					c.Notify(uuid)
				}
			}
			cancel()
			return
		}
		cancel()
		if attempt == releaseAttempts {
			c.log.Error("release node: giving up; the node stays locked until this conductor restarts", "node", uuid, "attempts", attempt, "err", err)
			return
		}
		c.log.Warn("release node; retrying", "node", uuid, "attempt", attempt, "err", err)
	}
}

// releaseAttempts bounds releaseAndRequeue: 10+20+…+60 s of timeouts.
const releaseAttempts = 6
