package redfish_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// manualClock is a clock tests move by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// waitSessions polls until b holds want sessions: an evicted account is
// logged out in the background. The deadline is only a safety net.
func waitSessions(t *testing.T, b *bmcsim.BMC, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for b.Sessions() != want {
		if time.Now().After(deadline) {
			t.Fatalf("BMC %s holds %d sessions, want %d", b.URL, b.Sessions(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPoolKeepsBoundedAccounts: beyond its bound the pool forgets the least
// recently used BMC account and logs out of its session; an account unused
// for the idle time is forgotten too; a forgotten BMC works again on its
// next use, with a new session.
func TestPoolKeepsBoundedAccounts(t *testing.T) {
	ctx := context.Background()
	lab := startLab(t, 3, "generic")
	clock := &manualClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	pool := newPool(t, fast)
	pool.SetBounds(2, time.Hour, clock.Now)
	pw := &redfish.Power{Pool: pool}
	read := func(i int) {
		t.Helper()
		if _, err := pw.GetPowerState(ctx, nodeFor(lab.BMCs[i], nil)); err != nil {
			t.Fatal(err)
		}
	}
	read(0)
	read(1)
	read(0) // 1 is now the least recently used
	read(2)
	if got := pool.Accounts(); got != 2 {
		t.Fatalf("pool keeps %d accounts, bound 2", got)
	}
	waitSessions(t, lab.BMCs[1], 0)
	for _, i := range []int{0, 2} {
		if s := lab.BMCs[i].Sessions(); s != 1 {
			t.Errorf("BMC %d: %d sessions, want its one (kept)", i, s)
		}
	}

	// BMC 1 again: a new session; the least recently used (0) goes.
	read(1)
	waitSessions(t, lab.BMCs[0], 0)
	if s := lab.BMCs[1].Sessions(); s != 1 {
		t.Errorf("BMC 1 after reuse: %d sessions, want 1", s)
	}

	// An hour later, the first new account pushes out every idle one.
	clock.Advance(time.Hour)
	read(0)
	if got := pool.Accounts(); got != 1 {
		t.Errorf("after an idle hour the pool keeps %d accounts, want only the one just used", got)
	}
	waitSessions(t, lab.BMCs[1], 0)
	waitSessions(t, lab.BMCs[2], 0)
}
