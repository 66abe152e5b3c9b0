package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// heldWriter is a seenWriter whose writes each wait for a release, so that
// a test decides what queues behind a write. A request is stored when its
// rowVersion is current[id] (the node row as the write finds it).
type heldWriter struct {
	t       *testing.T
	release chan error // each write takes one: its result
	current map[int64]int64

	mu     sync.Mutex
	groups [][]int64 // the ids of each group written, in order
	ctxErr []error   // each write's ctx.Err()
}

func (w *heldWriter) write(ctx context.Context, group []*seenReq) error {
	err := <-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, len(group))
	for i, r := range group {
		ids[i] = r.id
		r.ok = w.current[r.id] == r.rowVersion
	}
	w.groups = append(w.groups, ids)
	w.ctxErr = append(w.ctxErr, ctx.Err())
	return err
}

// result is one record call's outcome.
type result struct {
	id  int64
	ok  bool
	err error
}

// TestSeenBatcherGroups: a stamp arriving at an idle batcher is written
// alone; those arriving while a group is written are written together
// next, at most max to a group, in arrival order; each learns its own
// row's result; a failed group fails each of its stamps and no other; a
// leader whose request is cancelled still writes its group.
func TestSeenBatcherGroups(t *testing.T) {
	boom := errors.New("disk full")
	for _, tc := range []struct {
		name    string
		max     int
		queued  int     // stamps queued behind the first write
		results []error // each write's result, in order
		groups  []int   // the sizes of the groups written
	}{
		{"lone stamp", 0, 0, []error{nil}, []int{1}},
		{"queued stamps form one group", 0, 5, []error{nil, nil}, []int{1, 5}},
		{"groups hold at most max", 2, 5, []error{nil, nil, nil, nil}, []int{1, 2, 2, 1}},
		{"a failed group fails its own stamps", 3, 4, []error{nil, boom, nil}, []int{1, 3, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &heldWriter{t: t, release: make(chan error, len(tc.results)), current: map[int64]int64{}}
			b := &seenBatcher{max: tc.max}
			// Odd ids are at the version read; even ids changed since.
			for id := int64(1); id <= int64(tc.queued+1); id++ {
				w.current[id] = 7
				if id%2 == 0 {
					w.current[id] = 8
				}
			}
			out := make(chan result, tc.queued+1)
			rec := func(ctx context.Context, id int64) {
				ok, err := b.record(ctx, &seenReq{id: id, rowVersion: 7, micros: id}, w.write)
				out <- result{id, ok, err}
			}
			// The first stamp leads, with a cancelled context, and its
			// write is held until every other stamp has queued.
			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			go rec(cancelled, 1)
			waitFor(t, "the first write", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.busy && len(b.pending) == 0 })
			for i := range tc.queued {
				go rec(context.Background(), int64(i+2))
				waitFor(t, "a stamp to queue", func() bool { return b.waiting() == i+1 })
			}
			for _, err := range tc.results {
				w.release <- err
			}
			got := map[int64]result{}
			for range tc.queued + 1 {
				r := <-out
				got[r.id] = r
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			var sizes []int
			var order []int64
			for _, g := range w.groups {
				sizes = append(sizes, len(g))
				order = append(order, g...)
			}
			if !slices.Equal(sizes, tc.groups) {
				t.Errorf("groups %v, want sizes %v", w.groups, tc.groups)
			}
			if !slices.IsSorted(order) {
				t.Errorf("groups %v are not in arrival order", w.groups)
			}
			for i, e := range w.ctxErr {
				if e != nil {
					t.Errorf("write %d ran with a done context: %v", i, e)
				}
			}
			// Each stamp's result: its group's error, else its row's.
			failed := map[int64]bool{}
			for i, g := range w.groups {
				for _, id := range g {
					failed[id] = tc.results[i] != nil
				}
			}
			for id := int64(1); id <= int64(tc.queued+1); id++ {
				r := got[id]
				switch {
				case failed[id] && (r.ok || !errors.Is(r.err, boom)):
					t.Errorf("stamp %d of a failed group: ok %v, err %v", id, r.ok, r.err)
				case !failed[id] && (r.err != nil || r.ok != (id%2 == 1)):
					t.Errorf("stamp %d: ok %v, err %v; want ok %v", id, r.ok, r.err, id%2 == 1)
				}
			}
			if b.waiting() != 0 || b.busy {
				t.Errorf("batcher not idle after its writes: %d waiting, busy %v", b.waiting(), b.busy)
			}
		})
	}
}

// TestRecordSeenConcurrent: agents' narrow stamps recorded at once, and so
// committed in groups, each come back with their own row's result — stored
// while the node's row is the one read, refused (ok false, for the caller
// to decide again) once it changed — and once RecordSeen returned, every
// read shows the newest stamp and the heartbeat timeout runs from it: a
// node is found late exactly when the timeout has passed since it.
func TestRecordSeenConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		st := openT(t, dsn, Options{Now: clock.Now})
		const nodes, beats = 8, 6
		t0 := clock.Now().Truncate(time.Microsecond)
		views := make([]AgentView, nodes)
		for i := range nodes {
			n := &proto.Node{UUID: fmt.Sprintf("6e0c5f0e-1a2b-4c3d-8e9f-%012d", i), Driver: "fake-hardware",
				ProvisionState: proto.StateDeployWait, DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			v, err := st.AgentOf(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			set := []KeyValue{{proto.InfoAgentURL, "http://10.0.0.5:9999"}, {proto.InfoAgentVersion, "10.1"},
				{proto.InfoAgentLastHeartbeat, t0.UTC().Format(time.RFC3339Nano)}}
			if ok, err := st.RecordAgent(ctx, v, set, false); err != nil || !ok {
				t.Fatalf("RecordAgent = %v, %v", ok, err)
			}
			if views[i], err = st.AgentOf(ctx, n.UUID); err != nil {
				t.Fatal(err)
			}
			if i%2 == 1 { // the node's row changes after its agent view was read
				if _, err := st.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.Extra = proto.Dict{"changed": true}; return nil }); err != nil {
					t.Fatal(err)
				}
			}
		}
		stamp := func(k int) time.Time { return t0.Add(time.Duration(k) * time.Second) }
		var wg sync.WaitGroup
		oks := make([][beats]bool, nodes)
		for i := range nodes {
			for k := range beats {
				wg.Go(func() {
					ok, err := st.RecordSeen(ctx, views[i], stamp(k+1))
					if err != nil {
						t.Errorf("RecordSeen(node %d, beat %d): %v", i, k, err)
					}
					oks[i][k] = ok
				})
			}
		}
		wg.Wait()
		const timeout = time.Minute
		late := func(i int, now time.Time) bool {
			t.Helper()
			got, err := st.NodesWithWork(ctx, WorkQuery{HeartbeatBefore: now.Add(-timeout)})
			if err != nil {
				t.Fatal(err)
			}
			return slices.Contains(got, views[i].UUID)
		}
		for i := range nodes {
			want, last := i%2 == 0, stamp(beats)
			if !want {
				last = t0
			}
			for k, ok := range oks[i] {
				if ok != want {
					t.Errorf("node %d beat %d: ok %v, want %v", i, k, ok, want)
				}
			}
			if v, err := st.AgentOf(ctx, views[i].UUID); err != nil || !v.LastHeartbeat.Equal(last) {
				t.Errorf("node %d: AgentOf's last heartbeat %v (%v), want %v", i, v.LastHeartbeat, err, last)
			}
			n, err := st.GetNode(ctx, views[i].UUID)
			if want := last.UTC().Format(time.RFC3339Nano); err != nil || n.DriverInternalInfo[proto.InfoAgentLastHeartbeat] != want {
				t.Errorf("node %d: GetNode's agent_last_heartbeat %v (%v), want %s", i, n.DriverInternalInfo[proto.InfoAgentLastHeartbeat], err, want)
			}
			if late(i, last.Add(timeout-time.Microsecond)) || !late(i, last.Add(timeout+time.Microsecond)) {
				t.Errorf("node %d: the timeout does not run from its last stamp %v", i, last)
			}
		}
	})
}
