package conductor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kilnhq/kiln/controller/allocation"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Allocations: the conductor that owns an allocation's UUID on the hash
// ring moves it from allocating to active (a node claimed for it) or error,
// as Ironic's conductor does. controller/allocation decides; this file reads
// the nodes and writes the claim. A claim is the node's own conditional
// update (allocation.Claim inside UpdateNode, under the row lock), so two
// allocations, in this process or another, never take the same node; the
// one that loses moves on to its next candidate.

const (
	allocWorkers = 4
	// allocAttempts and allocRetryPause: as Ironic's conductor, nodes that
	// were reserved (by a power sync, say) are tried again a few times.
	allocAttempts   = 3
	allocRetryPause = time.Second
)

type allocator struct {
	c   *Conductor
	res *store.Resources[proto.Allocation]
	err error // why allocations cannot be served (a Store that is not SQL)

	// queued: waiting in queue; running: on a worker now, true when it
	// was asked for again meanwhile (a scan every second finds it still
	// allocating while a slow pass is on it). One allocation is never on
	// two workers: the second would claim its own node from the first,
	// find it "held by allocation", and fail it.
	mu      sync.Mutex
	queued  map[string]bool
	running map[string]bool
	queue   chan string
	shuffle func(n int, swap func(i, j int))
	// work processes one allocation: process, or a test's.
	work func(ctx context.Context, uuid string)
}

func newAllocator(c *Conductor) *allocator {
	res, err := store.NewResources(c.st, store.AllocationResource)
	a := &allocator{c: c, res: res, err: err, queued: map[string]bool{}, running: map[string]bool{},
		queue: make(chan string, 4096), shuffle: rand.Shuffle}
	a.work = a.process
	return a
}

// NotifyAllocation asks for allocation uuid to be processed now (the API
// created it); another conductor's allocations are left to it.
func (c *Conductor) NotifyAllocation(uuid string) {
	if c.owns(uuid) {
		c.alloc.enqueue(uuid)
	}
}

func (a *allocator) enqueue(uuid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.queued[uuid] {
		return
	}
	if _, ok := a.running[uuid]; ok {
		a.running[uuid] = true // its worker queues it again when done
		return
	}
	select {
	case a.queue <- uuid:
		a.queued[uuid] = true
	default: // full: the next scan finds it
	}
}

// loop runs the workers and, every ScanInterval, queues the allocations
// still allocating that this conductor owns (after a restart, or taken
// over from a dead conductor).
func (a *allocator) loop(ctx context.Context) {
	if a.err != nil {
		a.c.log.Warn("allocations are not served", "err", a.err)
		return
	}
	var wg sync.WaitGroup
	for range allocWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case uuid := <-a.queue:
					a.run(ctx, uuid)
				}
			}
		})
	}
	a.scan(ctx)
	every(ctx, a.c.cfg.ScanInterval, a.scan)
	wg.Wait()
}

// run processes uuid, taken from the queue, unless another worker has it;
// asked for again meanwhile, it goes back in the queue.
func (a *allocator) run(ctx context.Context, uuid string) {
	a.mu.Lock()
	delete(a.queued, uuid)
	if _, busy := a.running[uuid]; busy {
		a.running[uuid] = true
		a.mu.Unlock()
		return
	}
	a.running[uuid] = false
	a.mu.Unlock()
	a.work(ctx, uuid)
	a.mu.Lock()
	again := a.running[uuid]
	delete(a.running, uuid)
	a.mu.Unlock()
	if again && ctx.Err() == nil {
		a.enqueue(uuid)
	}
}

func (a *allocator) scan(ctx context.Context) {
	list, err := a.res.List(ctx, store.Query{Filters: map[string]string{"state": proto.AllocationAllocating}})
	if err != nil {
		if ctx.Err() == nil {
			a.c.log.Warn("scan allocations", "err", err)
		}
		return
	}
	for _, al := range list {
		if a.c.owns(al.UUID) {
			a.enqueue(al.UUID)
		}
	}
}

// errNotAllocating: the allocation was finished or deleted meanwhile.
var errNotAllocating = errors.New("allocation is no longer allocating")

// errClaimedHere: the candidate already holds this very allocation (it was
// processed in another conductor while the ring moved): finish on it
// rather than count it out.
var errClaimedHere = errors.New("node already claimed for this allocation")

// errFinishedHere: the allocation is already active on this very node (the
// same allocation processed twice, as when a scan queues it again while a
// worker is on it), so the node is its, not one to let go.
var errFinishedHere = errors.New("allocation is already active on this node")

// process finds and claims a node for one allocation, or fails it.
func (a *allocator) process(ctx context.Context, uuid string) {
	al, err := a.res.Get(ctx, uuid)
	if err != nil || al.State != proto.AllocationAllocating {
		return
	}
	req := allocation.RequestOf(al)
	// A node claimed before a crash, the allocation not yet marked: finish.
	held, err := a.c.st.ListNodes(ctx, store.NodeQuery{InstanceUUID: uuid})
	if err != nil {
		a.c.log.Warn("allocation: look for a claimed node", "allocation", uuid, "err", err)
		return
	}
	for _, n := range held {
		if n.AllocationUUID != nil && *n.AllocationUUID == uuid {
			a.finish(ctx, uuid, n.UUID)
			return
		}
	}
	no := false
	nodes, err := a.c.st.ListNodes(ctx, store.NodeQuery{ProvisionState: string(proto.StateAvailable),
		ResourceClass: req.ResourceClass, Maintenance: &no, Associated: &no})
	if err != nil {
		a.c.log.Warn("allocation: list nodes", "allocation", uuid, "err", err)
		return
	}
	cands, err := allocation.Candidates(nodes, req, a.shuffle)
	for attempt := 1; err == nil; attempt++ {
		var retry []*proto.Node
		for _, n := range cands {
			_, cerr := a.c.st.UpdateNode(ctx, n.UUID, func(n *proto.Node) error {
				if n.AllocationUUID != nil && *n.AllocationUUID == uuid {
					return errClaimedHere
				}
				return allocation.Claim(n, req)
			})
			switch {
			case cerr == nil, errors.Is(cerr, errClaimedHere):
				a.finish(ctx, uuid, n.UUID)
				return
			case errors.Is(cerr, allocation.ErrReserved):
				retry = append(retry, n)
			case errors.Is(cerr, allocation.ErrUnsuitable), errors.Is(cerr, store.ErrNotFound):
			default:
				a.c.log.Warn("allocation: claim node", "allocation", uuid, "node", n.UUID, "err", cerr)
				return // the next scan tries again
			}
		}
		if len(retry) == 0 {
			err = errors.New("all nodes were filtered out during reservation")
			break
		}
		if attempt == allocAttempts {
			err = fmt.Errorf("could not reserve any of %d suitable nodes", len(retry))
			break
		}
		cands = retry
		t := time.NewTimer(allocRetryPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	a.fail(ctx, uuid, err)
}

// finish marks the allocation active on node. If it is already active on
// node (a second worker's held-node path), nothing changes; if it was deleted,
// failed or finished on another node meanwhile, node is let go.
func (a *allocator) finish(ctx context.Context, uuid, node string) {
	_, err := a.res.Update(ctx, uuid, func(al *proto.Allocation) error {
		if al.State == proto.AllocationActive && al.NodeUUID != nil && *al.NodeUUID == node {
			return errFinishedHere
		}
		if al.State != proto.AllocationAllocating {
			return errNotAllocating
		}
		al.State, al.NodeUUID, al.LastError = proto.AllocationActive, &node, nil
		return nil
	})
	switch {
	case err == nil:
		a.c.log.Info("node reserved for allocation", "allocation", uuid, "node", node)
	case errors.Is(err, errFinishedHere):
	case errors.Is(err, store.ErrNotFound), errors.Is(err, errNotAllocating):
		if _, err := a.c.st.UpdateNode(ctx, node, func(n *proto.Node) error {
			allocation.Release(n, uuid)
			return nil
		}); err != nil {
			a.c.log.Warn("allocation gone: release its node", "allocation", uuid, "node", node, "err", err)
		}
	default:
		a.c.log.Warn("allocation: mark active", "allocation", uuid, "node", node, "err", err)
	}
}

func (a *allocator) fail(ctx context.Context, uuid string, reason error) {
	msg := fmt.Sprintf("Failed to process allocation %s: %s.", uuid, reason)
	_, err := a.res.Update(ctx, uuid, func(al *proto.Allocation) error {
		if al.State != proto.AllocationAllocating {
			return errNotAllocating
		}
		al.State, al.NodeUUID, al.LastError = proto.AllocationError, nil, &msg
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, errNotAllocating) {
		a.c.log.Warn("allocation: mark failed", "allocation", uuid, "err", err)
		return
	}
	a.c.log.Info("allocation failed", "allocation", uuid, "reason", reason.Error())
}

// forget deletes allocation id when the node it held was torn down
// (Ironic ends the allocation with the instance); nil id: none.
func (a *allocator) forget(ctx context.Context, id *string, node string) {
	if id == nil || a.err != nil {
		return
	}
	al, err := a.res.Get(ctx, *id)
	if err == nil && (al.NodeUUID == nil || *al.NodeUUID == node) {
		err = a.res.Delete(ctx, *id)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.c.log.Warn("delete the allocation of a torn-down node", "node", node, "allocation", *id, "err", err)
	} else if err == nil {
		a.c.log.Info("allocation ended with its instance", "node", node, "allocation", *id)
	}
}
