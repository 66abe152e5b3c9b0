package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// awaitWaiting returns once n writes wait at g. It spins rather than
// sleeps: nothing but the goroutines under test can change the count.
func awaitWaiting(g *writeGate, n int) {
	for {
		if u, o := g.waiters(); u+o == n {
			return
		}
		runtime.Gosched()
	}
}

// queueWaiter starts a goroutine that waits for g under a context marked
// urgent or not and sends name on got once it holds the gate; it returns
// once the waiter is queued, so that arrivals are in the order of calls.
func queueWaiter(t *testing.T, g *writeGate, name string, got chan<- string) {
	t.Helper()
	ctx := context.Background()
	if strings.HasPrefix(name, "u") {
		ctx = Urgent(ctx)
	}
	u0, o0 := g.waiters()
	go func() {
		if err := g.acquire(ctx); err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		got <- name
	}()
	awaitWaiting(g, u0+o0+1)
}

// The order the gate admits waiting writes in: urgent ones first, each
// class first come first served, and bulk work let through after
// urgentBurst urgent writes in a row.
func TestWriteGateOrder(t *testing.T) {
	burst := func(prefix string, n int) []string {
		var s []string
		for i := 1; i <= n; i++ {
			s = append(s, fmt.Sprintf("%s%d", prefix, i))
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		arrivals []string // u…: urgent; o…: other
		want     []string
	}{
		{"others in order", []string{"o1", "o2", "o3"}, []string{"o1", "o2", "o3"}},
		{"urgent in order", []string{"u1", "u2", "u3"}, []string{"u1", "u2", "u3"}},
		{"urgent first", []string{"o1", "u1", "o2", "u2"}, []string{"u1", "u2", "o1", "o2"}},
		{"bulk work is not starved",
			append([]string{"o1", "o2"}, burst("u", urgentBurst+3)...),
			append(append(append(burst("u", urgentBurst), "o1"), burst("u", urgentBurst+3)[urgentBurst:]...), "o2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &writeGate{}
			if err := g.acquire(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := make(chan string)
			for _, name := range tc.arrivals {
				queueWaiter(t, g, name, got)
			}
			var order []string
			for range tc.arrivals {
				g.release()
				order = append(order, <-got)
			}
			if !slices.Equal(order, tc.want) {
				t.Errorf("admitted %v, want %v", order, tc.want)
			}
			g.release()
			if u, o := g.waiters(); u+o != 0 || g.held {
				t.Errorf("after the last release: %d+%d waiting, held %v", u, o, g.held)
			}
		})
	}
}

// Urgent writes admitted while no other write waited do not count
// towards a burst.
func TestWriteGateBurstCountsOnlyWhileOthersWait(t *testing.T) {
	g := &writeGate{}
	if err := g.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	var order []string
	admit := func(names ...string) {
		for _, name := range names {
			queueWaiter(t, g, name, got)
		}
		for range names {
			g.release()
			order = append(order, <-got)
		}
	}
	admit("u1", "u2", "u3")
	var want []string
	names := []string{"o1"}
	for i := 4; i < 4+urgentBurst; i++ {
		names = append(names, fmt.Sprintf("u%d", i))
		want = append(want, fmt.Sprintf("u%d", i))
	}
	admit(names...)
	want = append([]string{"u1", "u2", "u3"}, append(want, "o1")...)
	if !slices.Equal(order, want) {
		t.Errorf("admitted %v, want %v", order, want)
	}
	g.release()
}

// A write whose context ends while it waits leaves the queue and gets an
// error; the gate goes on to the others.
func TestWriteGateCancelledWaiterLeaves(t *testing.T) {
	g := &writeGate{}
	if err := g.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	queueWaiter(t, g, "o1", got)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { errc <- g.acquire(ctx) }()
	awaitWaiting(g, 2)
	queueWaiter(t, g, "o3", got)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", err)
	}
	if _, o := g.waiters(); o != 2 {
		t.Fatalf("%d waiting after the cancel, want 2", o)
	}
	g.release()
	if n := <-got; n != "o1" {
		t.Fatalf("first admitted %s, want o1", n)
	}
	g.release()
	if n := <-got; n != "o3" {
		t.Fatalf("then %s, want o3", n)
	}
	g.release()
	if g.held {
		t.Fatal("gate held with nobody waiting")
	}
}

// A waiter the gate is handed to just as its context ends either takes it
// or passes it on: never is the gate left held by nobody.
func TestWriteGateHandOverRacingACancel(t *testing.T) {
	for range 200 {
		g := &writeGate{}
		if err := g.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() { errc <- g.acquire(ctx) }()
		awaitWaiting(g, 1)
		go cancel()
		g.release()
		if err := <-errc; err == nil {
			g.release() // the waiter got it: its turn ends
		}
		g.mu.Lock()
		held := g.held
		g.mu.Unlock()
		if held {
			t.Fatal("gate held by nobody after a hand-over raced a cancel")
		}
		cancel()
	}
}

func TestUrgentMarksTheContext(t *testing.T) {
	ctx := context.Background()
	if IsUrgent(ctx) {
		t.Fatal("a plain context is urgent")
	}
	u := Urgent(ctx)
	if !IsUrgent(u) || Urgent(u) != u {
		t.Fatal("Urgent did not mark the context once")
	}
	if c, cancel := context.WithCancel(u); !IsUrgent(c) {
		t.Fatal("a child of an urgent context is not urgent")
	} else {
		cancel()
	}
	// UrgentOnce: urgent from the moment its flag is set.
	flag := new(atomic.Bool)
	once := UrgentOnce(ctx, flag)
	if IsUrgent(once) {
		t.Fatal("urgent before its flag is set")
	}
	if u := Urgent(once); !IsUrgent(u) || flag.Load() {
		t.Fatal("Urgent over an unset flag: not urgent, or it set the flag")
	}
	flag.Store(true)
	if c, cancel := context.WithCancel(once); !IsUrgent(once) || !IsUrgent(c) {
		t.Fatal("not urgent once its flag is set")
	} else {
		cancel()
	}
}

// On a real SQLite store, writes that wait for the writer are admitted
// urgent first, then in order of arrival, whether each is a statement of
// its own (execWrite) or a transaction (writeTx).
func TestSQLiteWritesWaitInTheGate(t *testing.T) {
	ctx := context.Background()
	st := openT(t, filepath.Join(t.TempDir(), "kiln.db"), Options{})
	s := st.(*sqlStore)
	if s.gate == nil {
		t.Fatal("the SQLite store has no write gate")
	}
	if _, err := s.wdb.ExecContext(ctx, "CREATE TABLE gate_order (id INTEGER PRIMARY KEY AUTOINCREMENT, who TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	// Hold the gate as a write in progress would.
	if err := s.gate.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	write := func(name string, tx bool) {
		wctx := ctx
		if strings.HasPrefix(name, "u") {
			wctx = Urgent(ctx)
		}
		u0, o0 := s.gate.waiters()
		wg.Go(func() {
			var err error
			if tx {
				err = s.writeTx(wctx, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(wctx, "INSERT INTO gate_order (who) VALUES (?)", name)
					return err
				})
			} else {
				_, err = s.execWrite(wctx, "INSERT INTO gate_order (who) VALUES (?)", name)
			}
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
		awaitWaiting(s.gate, u0+o0+1)
	}
	write("o1", false)
	write("o2", true)
	write("u1", true)
	write("o3", false)
	write("u2", false)
	s.gate.release()
	wg.Wait()
	rows, err := s.rdb.QueryContext(ctx, "SELECT who FROM gate_order ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var order []string
	for rows.Next() {
		var who string
		if err := rows.Scan(&who); err != nil {
			t.Fatal(err)
		}
		order = append(order, who)
	}
	if want := []string{"u1", "u2", "o1", "o2", "o3"}; !slices.Equal(order, want) {
		t.Errorf("written in the order %v, want %v", order, want)
	}
	if s.gate.held {
		t.Error("the gate is held after every write ended")
	}
}
