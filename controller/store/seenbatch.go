package store

import (
	"context"
	"runtime"
	"sync"
)

// Narrow heartbeat stamps (RecordSeen) are committed in groups: a stamp
// that arrives while another group is being written waits for that write
// to end and is then written with every stamp that arrived meanwhile, in
// one transaction; a stamp that arrives when the writer is idle is written
// at once, alone. Each stamp still costs its own conditional upsert, but a
// group shares one commit (on SQLite, one append of the changed pages to
// the log, which was most of a lone stamp's cost).
//
// RecordSeen returns only when its group is committed, with its own row's
// result: so the caller answers 202 only once the stamp is stored, every
// reader (of any controller) sees it from then on, a stamp whose node row
// changed since AgentOf read it is reported (ok false) to the caller,
// which decides again on the current node as before — a heartbeat the
// conductor must see is never dropped in a batch — and a crash loses no
// acknowledged stamp. The heartbeat timeout therefore runs from exactly
// the stamps it ran from before; nothing waits on a timer, so no stamp
// sits in memory while its node times out. What a heartbeat waits for is
// at most the group ahead of it (bounded by maxSeenBatch stamps) and its
// own. The leader of a group yields once before taking it (see record).
// Several controllers sharing PostgreSQL each group their own stamps;
// the upsert keeps the newer stamp whichever commits last.

// maxSeenBatch bounds a group: the stamps one transaction writes, so the
// writer is never held long for heartbeats alone.
const maxSeenBatch = 128

// seenReq is one narrow stamp to write and, once written, its result.
type seenReq struct {
	id, rowVersion, micros int64
	ok                     bool  // the node's row was at rowVersion: the stamp is stored
	err                    error // the group's write failed
	// wake tells a waiting request its group is written (false) or that
	// it leads the next group (true).
	wake chan bool
}

// seenWriter writes a group of stamps in one transaction and sets each
// request's ok.
type seenWriter func(context.Context, []*seenReq) error

// seenBatcher commits seenReqs in groups. At most one group is written at
// a time; the request at the head of the queue when it ends leads the
// next. The zero value is ready, with groups of at most maxSeenBatch.
type seenBatcher struct {
	max int // 0: maxSeenBatch

	mu      sync.Mutex
	pending []*seenReq // waiting for the next group, in arrival order
	busy    bool       // a group is being written
}

// record writes r through write, with whichever stamps are waiting, and
// reports whether it was stored.
func (b *seenBatcher) record(ctx context.Context, r *seenReq, write seenWriter) (bool, error) {
	r.wake = make(chan bool, 1)
	b.mu.Lock()
	b.pending = append(b.pending, r)
	if b.busy {
		b.mu.Unlock()
		if lead := <-r.wake; !lead {
			return r.ok, r.err
		}
		b.mu.Lock()
	}
	// r leads: it heads the queue (a leader starts when the queue was
	// empty, or is handed the lead as its head). It first lets the
	// goroutines that are ready run, so that the heartbeats being handled
	// on the other core queue their stamps into its group: with 16
	// connections on 2 cores, groups grew from about 2 stamps to about 11
	// (BenchmarkRecordSeen) and a stamp's CPU fell by half or more. No
	// timer: a lone stamp on an idle controller waits for nothing.
	b.busy = true
	b.mu.Unlock()
	runtime.Gosched()
	b.mu.Lock()
	n := len(b.pending)
	if b.max > 0 {
		n = min(n, b.max)
	} else {
		n = min(n, maxSeenBatch)
	}
	group := b.pending[:n:n]
	b.pending = append([]*seenReq(nil), b.pending[n:]...)
	b.mu.Unlock()

	// The group is written even if the leader's request is cancelled
	// meanwhile: the others wait on it.
	err := write(context.WithoutCancel(ctx), group)
	for _, q := range group {
		if err != nil {
			q.ok, q.err = false, err
		}
		if q != r {
			q.wake <- false
		}
	}

	b.mu.Lock()
	if len(b.pending) == 0 {
		b.busy = false
	} else {
		b.pending[0].wake <- true
	}
	b.mu.Unlock()
	return r.ok, r.err
}

// waiting is the number of requests queued for the next group (tests).
func (b *seenBatcher) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}
