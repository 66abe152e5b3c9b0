package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// queued is how many waiters g holds, urgent and ordinary.
func (g *writeGate) queued() (urgent, normal int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.urgent), len(g.normal)
}

// waitQueued polls until g holds urgent and normal waiters; the deadline
// is only a safety net.
func waitQueued(t *testing.T, g *writeGate, urgent, normal int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Millisecond) {
		u, n := g.queued()
		if u == urgent && n == normal {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gate holds %d urgent, %d ordinary waiters; want %d, %d", u, n, urgent, normal)
		}
	}
}

func TestWriteGateOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  int
		// arrivals while the writer is held: u… urgent, n… ordinary
		arrive []string
		want   []string
	}{
		{"ordinary only: first come first served", 4, []string{"n1", "n2", "n3"}, []string{"n1", "n2", "n3"}},
		{"urgent only: first come first served", 4, []string{"u1", "u2", "u3"}, []string{"u1", "u2", "u3"}},
		{"urgent overtake ordinary", 4, []string{"n1", "n2", "u1", "u2"}, []string{"u1", "u2", "n1", "n2"}},
		{"after run urgent grants an ordinary one goes", 2,
			[]string{"n1", "n2", "u1", "u2", "u3", "u4", "u5"}, []string{"u1", "u2", "n1", "u3", "u4", "n2", "u5"}},
		{"run of one alternates", 1, []string{"n1", "n2", "u1", "u2", "u3"}, []string{"u1", "n1", "u2", "n2", "u3"}},
		{"urgent grants with no ordinary waiter do not count", 1,
			[]string{"u1", "u2", "u3"}, []string{"u1", "u2", "u3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newWriteGate(tc.run)
			ctx := context.Background()
			if err := g.acquire(ctx, false); err != nil {
				t.Fatal(err)
			}
			granted := make(chan string)
			var u, n int
			for _, name := range tc.arrive {
				urgent := name[0] == 'u'
				go func() {
					if err := g.acquire(ctx, urgent); err != nil {
						t.Error(err)
					}
					granted <- name
				}()
				if urgent {
					u++
				} else {
					n++
				}
				waitQueued(t, g, u, n)
			}
			var got []string
			for range tc.arrive {
				g.release() // the previous holder's
				got = append(got, <-granted)
			}
			g.release()
			if !slices.Equal(got, tc.want) {
				t.Errorf("grants %v; want %v", got, tc.want)
			}
			if g.held {
				t.Error("gate still held after the last release")
			}
		})
	}
}

// A waiter whose context ends leaves the queue holding nothing, and the
// others are served as before.
func TestWriteGateCancelledWaiter(t *testing.T) {
	g := newWriteGate(4)
	bg := context.Background()
	if err := g.acquire(bg, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	gone := make(chan error)
	go func() { gone <- g.acquire(ctx, true) }()
	waitQueued(t, g, 1, 0)
	granted := make(chan struct{})
	go func() {
		if err := g.acquire(bg, false); err != nil {
			t.Error(err)
		}
		close(granted)
	}()
	waitQueued(t, g, 1, 1)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v; want context.Canceled", err)
	}
	waitQueued(t, g, 0, 1)
	g.release()
	<-granted
	g.release()
	if err := g.acquire(bg, false); err != nil || !g.held {
		t.Fatalf("gate not free after the last release: %v", err)
	}
}

// A waiter granted the writer just as its context ends passes it on.
func TestWriteGateGrantedAsCancelled(t *testing.T) {
	for range 20 {
		g := newWriteGate(4)
		bg := context.Background()
		if err := g.acquire(bg, false); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		res := make(chan error)
		go func() { res <- g.acquire(ctx, false) }()
		waitQueued(t, g, 0, 1)
		cancel()
		g.release() // races with the cancellation: either way the gate ends free
		if err := <-res; err == nil {
			g.release()
		}
		g.mu.Lock()
		held := g.held
		g.mu.Unlock()
		if held {
			t.Fatal("gate held by nobody")
		}
	}
}

// On a SQLite store an urgent write queued behind ordinary ones commits
// before them.
func TestUrgentWriteOvertakesQueuedOnes(t *testing.T) {
	st := openT(t, "sqlite://"+filepath.Join(t.TempDir(), "kiln.db"), Options{})
	s := st.(*sqlStore)
	ctx := context.Background()
	if _, err := s.wdb.ExecContext(ctx, "CREATE TABLE gate_order (seq INTEGER PRIMARY KEY AUTOINCREMENT, who TEXT)"); err != nil {
		t.Fatal(err)
	}
	write := func(ctx context.Context, who string) error {
		return s.writeTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO gate_order (who) VALUES (?)", who)
			return err
		})
	}
	hold, holding := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 8)
	go func() {
		errs <- s.writeTx(ctx, func(tx *sql.Tx) error {
			close(holding)
			<-hold
			_, err := tx.ExecContext(ctx, "INSERT INTO gate_order (who) VALUES ('holder')")
			return err
		})
	}()
	<-holding
	const ordinary = 3 // under writeGateRun, so none goes before the urgent one
	for i := range ordinary {
		go func() { errs <- write(ctx, fmt.Sprintf("n%d", i)) }()
		waitQueued(t, s.gate, 0, i+1)
	}
	go func() { errs <- write(Urgent(ctx), "urgent") }()
	waitQueued(t, s.gate, 1, ordinary)
	close(hold)
	for range ordinary + 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT who FROM gate_order ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var who string
		if err := rows.Scan(&who); err != nil {
			t.Fatal(err)
		}
		got = append(got, who)
	}
	if want := []string{"holder", "urgent", "n0", "n1", "n2"}; !slices.Equal(got, want) {
		t.Errorf("commit order %v; want %v", got, want)
	}
}
