package store

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// walCheckpointer copies the SQLite write-ahead log back into the database
// file on its own connection, so that no commit pays for it. With SQLite's
// default (wal_autocheckpoint 1000) the commit that crosses 1,000 WAL pages
// runs the checkpoint itself, holding the one writer connection while it
// reads the frames back and fsyncs: on the store's UpdateNode benchmark
// that was 19,700 preads and 159 fsyncs per 5,000 commits, against 1,350
// preads and 9 fsyncs with the checkpoints moved here (strace -c).
//
// Checkpoints are PASSIVE (they never wait for, nor block, the writer or a
// reader): one every kickEvery commits (counted by writeTx and execWrite)
// and one per tick, for any other write. A PASSIVE checkpoint cannot
// copy frames a reader still uses, and under a steady stream of writes
// it never leaves the log fully copied when the next write begins, which
// is when SQLite starts the log over from the top of the file: the log
// only grows. So when it passes restartFrames pages a RESTART checkpoint
// (it holds off the writer while it copies the few frames the PASSIVE
// ones left, and waits for readers) lets the next write start it over.
// In a 2,000-node fleet with a 64 MB threshold the WAL file ended at
// 72 MB, against 14 MB with SQLite's own checkpoints. When a tick finds nothing new
// written since the last one, a TRUNCATE checkpoint empties the file.
type walCheckpointer struct {
	db *sql.DB // its own single connection

	kickEvery     int64
	restartFrames int64
	tick          time.Duration

	commits atomic.Int64 // commits counted by writeTx and execWrite
	// seen is the commit count a finished checkpoint started after: every
	// frame committed up to it was in the log it worked on (tests).
	seen  atomic.Int64
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	trunc atomic.Int64 // TRUNCATE checkpoints run (tests)

	closeOnce sync.Once
	closeErr  error
}

// A fleet-shaped node's update writes ~13 WAL pages, so 128 commits are
// ~1,700 pages (7 MB) of log between checkpoints, enough for a checkpoint
// to copy a page written several times over only once. Variables so that
// tests can make them small (store tests do not run in parallel).
var (
	walKickEvery     int64 = 128
	walRestartFrames int64 = 4096 // 16 MB of 4 KB pages; see restartFrames
	walTick                = time.Second
)

func newWALCheckpointer(db *sql.DB) *walCheckpointer {
	return &walCheckpointer{db: db, kickEvery: walKickEvery, restartFrames: walRestartFrames, tick: walTick,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// committed counts one commit on the writer and wakes the checkpointer
// every kickEvery commits; it never blocks.
func (c *walCheckpointer) committed() {
	if c.commits.Add(1)%c.kickEvery == 0 {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

func (c *walCheckpointer) start() { go c.run() }

func (c *walCheckpointer) run() {
	defer close(c.done)
	t := time.NewTicker(c.tick)
	defer t.Stop()
	var last [2]int64 // the previous tick's (log, checkpointed)
	for {
		select {
		case <-c.stop:
			c.checkpoint("TRUNCATE")
			return
		case <-c.kick:
			c.checkpoint("PASSIVE")
		case <-t.C:
			log, done := c.checkpoint("PASSIVE")
			if log > 0 && log == done && [2]int64{log, done} == last {
				// Nothing written for a whole tick: empty the file.
				c.checkpoint("TRUNCATE")
				c.trunc.Add(1)
				log, done = 0, 0
			}
			last = [2]int64{log, done}
		}
	}
}

// checkpoint runs one checkpoint of mode and returns the log's size and
// the frames now copied, in pages; a PASSIVE one that leaves more than
// restartFrames pages in the log is followed by a RESTART.
func (c *walCheckpointer) checkpoint(mode string) (log, done int64) {
	commits := c.commits.Load()
	var busy int64
	err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &done)
	if err != nil {
		slog.Warn("SQLite checkpoint failed", "mode", mode, "err", err)
		return 0, 0
	}
	c.seen.Store(commits)
	if mode == "PASSIVE" && log > c.restartFrames {
		return c.checkpoint("RESTART")
	}
	return log, done
}

// close runs a last TRUNCATE checkpoint, stops the goroutine and closes
// the connection; closing again does nothing (the store's Close may be
// called twice).
func (c *walCheckpointer) close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.closeErr = c.db.Close()
	})
	return c.closeErr
}
