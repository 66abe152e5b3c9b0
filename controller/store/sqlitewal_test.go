package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// walSize is the size of the store's WAL file; 0 when there is none.
func walSize(t *testing.T, db string) int64 {
	t.Helper()
	fi, err := os.Stat(db + "-wal")
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// waitFor polls cond until it holds; the deadline is only a safety net.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// setWAL sets the checkpointer's knobs for stores opened by this test.
func setWAL(t *testing.T, every int64, tick time.Duration) {
	kick, tk := walKickEvery, walTick
	walKickEvery, walTick = every, tick
	t.Cleanup(func() { walKickEvery, walTick = kick, tk })
}

// The writer never checkpoints (wal_autocheckpoint 0), so without the
// checkpointer this test's 16 MB of updates would all stay in the log. With
// it, each batch's frames are copied back before the next batch, the next
// write restarts the log from its start, and the file stays at about one
// batch.
func TestWALCheckpointerBoundsTheLog(t *testing.T) {
	setWAL(t, 8, time.Hour) // kicks only: no tick during the test
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "kiln.db")
	st := openT(t, db, Options{})
	s := st.(*sqlStore)
	var autockpt int
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&autockpt); err != nil || autockpt != 0 {
		t.Fatalf("writer's wal_autocheckpoint = %d, %v; want 0", autockpt, err)
	}
	uuids := make([]string, 40)
	for i := range uuids {
		uuids[i] = mustCreate(t, st, newNode(fmt.Sprintf("wal-%02d", i), fleetShaped)).UUID
	}
	// Start from an empty file: the migrations' and creations' frames may
	// have grown it before the first kick.
	if _, err := s.wal.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	var peak int64
	const batches = 60
	for b := range batches {
		for i := range walKickEvery {
			_, err := st.UpdateNode(ctx, uuids[(b*8+int(i))%len(uuids)], func(n *proto.Node) error {
				n.Extra = proto.Dict{"batch": b, "pad": fmt.Sprintf("%01000d", i)}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		n := s.wal.commits.Load()
		waitFor(t, "a checkpoint after the batch", func() bool { return s.wal.seen.Load() >= n })
		peak = max(peak, walSize(t, db))
	}
	var busy, log, done int64
	if err := s.wal.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &done); err != nil {
		t.Fatal(err)
	}
	// One batch is 8 commits of ~13 pages; the bound allows four.
	const bound = 4 * 8 * 16 * 4096
	if peak > bound {
		t.Errorf("WAL grew to %d bytes over %d batches; want at most %d", peak, batches, bound)
	}
	if log > bound/4096 {
		t.Errorf("WAL holds %d pages after the last checkpoint; want at most %d", log, bound/4096)
	}
	t.Logf("%d commits; WAL peak %d bytes, %d pages at the end", s.wal.commits.Load(), peak, log)
}

// When nothing is written for a tick the checkpointer empties the WAL
// file; Close stops it and leaves none behind.
func TestWALCheckpointerTruncatesWhenIdleAndClosesCleanly(t *testing.T) {
	setWAL(t, 1<<30, 5*time.Millisecond) // ticks only
	db := filepath.Join(t.TempDir(), "kiln.db")
	st, err := Open(context.Background(), db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*sqlStore)
	for i := range 19 {
		mustCreate(t, st, newNode(fmt.Sprintf("idle-%02d", i), fleetShaped))
	}
	// A truncation counted from before the last write, which leaves frames
	// in the log until one runs after it.
	before := s.wal.trunc.Load()
	mustCreate(t, st, newNode("idle-19", fleetShaped))
	waitFor(t, "a TRUNCATE checkpoint", func() bool { return s.wal.trunc.Load() > before })
	waitFor(t, "an empty WAL file", func() bool { return walSize(t, db) == 0 })
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.wal.done:
	default:
		t.Fatal("Close returned with the checkpointer still running")
	}
	if n := walSize(t, db); n != 0 {
		t.Errorf("WAL file of %d bytes left after Close", n)
	}
	// The database is whole: reopened, it has every node.
	st2 := openT(t, db, Options{})
	ns, err := st2.ListNodes(context.Background(), NodeQuery{})
	if err != nil || len(ns) != 20 {
		t.Fatalf("reopened: %d nodes, %v; want 20", len(ns), err)
	}
}
