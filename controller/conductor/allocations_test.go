package conductor

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// allocFixture is a SQLite store with n available nodes of class gold.
func allocFixture(t *testing.T, nodes int) (store.Store, *store.Resources[proto.Allocation]) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i := range nodes {
		n := &proto.Node{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Driver: "fake-hardware",
			ProvisionState: proto.StateAvailable, ResourceClass: ptr("gold"), Traits: []string{"CUSTOM_GPU"}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	res, err := store.NewResources(st, store.AllocationResource)
	if err != nil {
		t.Fatal(err)
	}
	return st, res
}

func newAllocation(t *testing.T, res *store.Resources[proto.Allocation], i int) string {
	t.Helper()
	a := &proto.Allocation{UUID: fmt.Sprintf("aaaaaaaa-0000-4000-8000-%012d", i), State: proto.AllocationAllocating,
		ResourceClass: ptr("gold"), Traits: []string{"CUSTOM_GPU"}, CandidateNodes: []string{}, Extra: proto.Dict{}}
	if err := res.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return a.UUID
}

// TestAllocationsRaceForNodes: 20 allocations processed at once by two
// conductors sharing a store, for 10 nodes: exactly 10 become active, no two
// on the same node, each node names its allocation, and the other 10 fail
// with Ironic's last_error.
func TestAllocationsRaceForNodes(t *testing.T) {
	ctx := context.Background()
	st, res := allocFixture(t, 10)
	conds := []*Conductor{New(Config{Store: st, Agent: &stubAgent{}, Name: "c1"}), New(Config{Store: st, Agent: &stubAgent{}, Name: "c2"})}
	var ids []string
	for i := range 20 {
		ids = append(ids, newAllocation(t, res, i))
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			<-start
			conds[i%2].alloc.process(ctx, id)
		})
	}
	close(start)
	wg.Wait()

	byNode := map[string]string{}
	active, failed := 0, 0
	for _, id := range ids {
		a, err := res.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch a.State {
		case proto.AllocationActive:
			active++
			if a.NodeUUID == nil {
				t.Fatalf("active allocation %s without a node", id)
			}
			if other, ok := byNode[*a.NodeUUID]; ok {
				t.Errorf("node %s given to %s and %s", *a.NodeUUID, other, id)
			}
			byNode[*a.NodeUUID] = id
			n, err := st.GetNode(ctx, *a.NodeUUID)
			if err != nil {
				t.Fatal(err)
			}
			if n.AllocationUUID == nil || *n.AllocationUUID != id || n.InstanceUUID == nil || *n.InstanceUUID != id {
				t.Errorf("node %s: allocation_uuid %v instance_uuid %v, want %s", n.UUID, n.AllocationUUID, n.InstanceUUID, id)
			}
		case proto.AllocationError:
			failed++
			want := "Failed to process allocation " + id + ": "
			if a.LastError == nil || !strings.HasPrefix(*a.LastError, want) || a.NodeUUID != nil {
				t.Errorf("failed allocation %s: last_error %v node %v", id, a.LastError, a.NodeUUID)
			}
		default:
			t.Errorf("allocation %s still %s", id, a.State)
		}
	}
	if active != 10 || failed != 10 {
		t.Errorf("%d active, %d failed; want 10 and 10", active, failed)
	}
}

// TestAllocationFinishesAClaimedNode: an allocation whose node was claimed
// before a crash is finished on that node, not given a second one.
func TestAllocationFinishesAClaimedNode(t *testing.T) {
	ctx := context.Background()
	st, res := allocFixture(t, 3)
	id := newAllocation(t, res, 1)
	claimed := "00000000-0000-4000-8000-000000000002"
	if _, err := st.UpdateNode(ctx, claimed, func(n *proto.Node) error {
		n.AllocationUUID, n.InstanceUUID = ptr(id), ptr(id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := New(Config{Store: st, Agent: &stubAgent{}, Name: "c1"})
	c.alloc.process(ctx, id)
	a, err := res.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != proto.AllocationActive || a.NodeUUID == nil || *a.NodeUUID != claimed {
		t.Errorf("allocation %s on %v, want active on %s", a.State, a.NodeUUID, claimed)
	}
	nodes, _ := st.ListNodes(ctx, store.NodeQuery{InstanceUUID: id})
	if len(nodes) != 1 {
		t.Errorf("%d nodes hold the allocation, want 1", len(nodes))
	}
}

// TestAllocationDeletedWhileClaiming: when the allocation is gone by the
// time its node is claimed, the node is let go again.
func TestAllocationDeletedWhileClaiming(t *testing.T) {
	ctx := context.Background()
	st, res := allocFixture(t, 1)
	id := newAllocation(t, res, 1)
	node := "00000000-0000-4000-8000-000000000000"
	if _, err := st.UpdateNode(ctx, node, func(n *proto.Node) error {
		n.AllocationUUID, n.InstanceUUID = ptr(id), ptr(id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := res.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	c := New(Config{Store: st, Agent: &stubAgent{}, Name: "c1"})
	c.alloc.finish(ctx, id, node)
	n, err := st.GetNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if n.AllocationUUID != nil || n.InstanceUUID != nil {
		t.Errorf("node still held: allocation %v instance %v", n.AllocationUUID, n.InstanceUUID)
	}
}

// TestAllocationFinishedTwiceKeepsItsNode: an allocation processed twice at
// once (a scan queues it again while a worker is on it) reaches finish twice
// for the node it claimed; the second call must not let that node go, or a
// third allocation claims it too (seen under load: two active allocations on
// one node).
func TestAllocationFinishedTwiceKeepsItsNode(t *testing.T) {
	ctx := context.Background()
	st, res := allocFixture(t, 1)
	id := newAllocation(t, res, 1)
	node := "00000000-0000-4000-8000-000000000000"
	c := New(Config{Store: st, Agent: &stubAgent{}, Name: "c1"})
	c.alloc.process(ctx, id)
	c.alloc.finish(ctx, id, node)
	a, err := res.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != proto.AllocationActive || a.NodeUUID == nil || *a.NodeUUID != node {
		t.Errorf("allocation %s on %v, want active on %s", a.State, a.NodeUUID, node)
	}
	n, err := st.GetNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if n.AllocationUUID == nil || *n.AllocationUUID != id || n.InstanceUUID == nil || *n.InstanceUUID != id {
		t.Errorf("node let go: allocation_uuid %v instance_uuid %v, want %s", n.AllocationUUID, n.InstanceUUID, id)
	}
	other := newAllocation(t, res, 2)
	c.alloc.process(ctx, other)
	if a, err := res.Get(ctx, other); err != nil || a.State != proto.AllocationError {
		t.Errorf("a second allocation for the one node: %+v, %v; want error", a, err)
	}
}

// TestAllocationNoMatch: Ironic's last_error when no node has the traits.
func TestAllocationNoMatch(t *testing.T) {
	ctx := context.Background()
	st, res := allocFixture(t, 2)
	a := &proto.Allocation{UUID: "aaaaaaaa-0000-4000-8000-000000000099", State: proto.AllocationAllocating,
		ResourceClass: ptr("gold"), Traits: []string{"CUSTOM_FPGA"}, Extra: proto.Dict{}}
	if err := res.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	New(Config{Store: st, Agent: &stubAgent{}, Name: "c1"}).alloc.process(ctx, a.UUID)
	got, _ := res.Get(ctx, a.UUID)
	want := "Failed to process allocation " + a.UUID + ": no suitable nodes have the requested traits CUSTOM_FPGA."
	if got.State != proto.AllocationError || got.LastError == nil || *got.LastError != want {
		t.Errorf("state %s last_error %v, want error %q", got.State, got.LastError, want)
	}
}

// TestAllocationClaimedHereMeanwhile: when the allocation's candidate is
// claimed for this same allocation between the listing and the claim (the
// allocation processed in another conductor as the ring moved), the
// allocation ends active on that node instead of failing with "all nodes
// were filtered out during reservation".
func TestAllocationClaimedHereMeanwhile(t *testing.T) {
	ctx := context.Background()
	st, res := allocFixture(t, 1)
	id := newAllocation(t, res, 1)
	node := "00000000-0000-4000-8000-000000000000"
	c := New(Config{Store: st, Agent: &stubAgent{}, Name: "c1"})
	c.alloc.shuffle = func(int, func(i, j int)) {
		// Runs after the candidates were listed and before they are claimed.
		if _, err := st.UpdateNode(ctx, node, func(n *proto.Node) error {
			n.AllocationUUID, n.InstanceUUID = ptr(id), ptr(id)
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
	c.alloc.process(ctx, id)
	a, err := res.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != proto.AllocationActive || a.NodeUUID == nil || *a.NodeUUID != node {
		t.Errorf("allocation %s on %v (last_error %v), want active on %s", a.State, a.NodeUUID, a.LastError, node)
	}
}

// TestAllocationOneWorkerAtATime: an allocation asked for again while a
// worker processes it (a scan finds it still allocating) waits for that
// worker, then is processed once more; it is never on two workers at once.
func TestAllocationOneWorkerAtATime(t *testing.T) {
	ctx := context.Background()
	st, _ := allocFixture(t, 0)
	a := New(Config{Store: st, Agent: &stubAgent{}, Name: "c1"}).alloc
	entered, release := make(chan string), make(chan struct{})
	a.work = func(_ context.Context, uuid string) {
		entered <- uuid
		<-release
	}
	const id = "aaaaaaaa-0000-4000-8000-000000000001"
	a.enqueue(id)
	done := make(chan struct{})
	go func() { a.run(ctx, <-a.queue); close(done) }()
	<-entered
	a.enqueue(id) // asked again while running
	a.enqueue(id)
	if n := len(a.queue); n != 0 {
		t.Fatalf("%d queued while its worker runs, want 0", n)
	}
	// A second worker handed the same UUID (queued before the first took
	// it) leaves it to the first.
	a.run(ctx, id)
	close(release)
	<-done
	if n := len(a.queue); n != 1 {
		t.Fatalf("%d queued after the worker finished, want 1 (asked again meanwhile)", n)
	}
	go func() { a.run(ctx, <-a.queue) }()
	if got := <-entered; got != id {
		t.Errorf("processed %s, want %s", got, id)
	}
	if n := len(a.queue); n != 0 {
		t.Errorf("%d queued after the second pass began, want 0", n)
	}
}
