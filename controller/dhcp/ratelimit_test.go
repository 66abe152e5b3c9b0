package dhcp

import (
	"fmt"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestRateLimiter(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	l := newRateLimiter(3, time.Second, clock.now)
	steps := []struct {
		advance time.Duration
		mac     string
		want    bool
	}{
		{0, "a", true}, {0, "a", true}, {0, "a", true},
		{0, "a", false},                      // burst spent
		{0, "b", true},                       // another MAC has its own bucket
		{500 * time.Millisecond, "a", false}, // half a token
		{500 * time.Millisecond, "a", true},  // one token back
		{0, "a", false},
		{time.Hour, "a", true}, {0, "a", true}, {0, "a", true}, // refilled to the burst, not beyond
		{0, "a", false},
	}
	for i, s := range steps {
		clock.t = clock.t.Add(s.advance)
		if got := l.allow(s.mac); got != s.want {
			t.Fatalf("step %d (%s after %s): allow = %v, want %v", i, s.mac, s.advance, got, s.want)
		}
	}
}

func TestRateLimiterForgetsQuietMACs(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	l := newRateLimiter(2, time.Second, clock.now)
	for i := range maxBuckets {
		l.allow(fmt.Sprint(i))
	}
	clock.t = clock.t.Add(time.Minute)
	l.allow("busy")
	l.allow("busy")
	l.allow("new")
	if n := len(l.buckets); n != 2 {
		t.Fatalf("%d buckets kept, want 2 (busy and new)", n)
	}
	if l.allow("busy") {
		t.Fatal("the busy MAC's empty bucket was forgotten")
	}
	if !l.allow("0") {
		t.Fatal("a forgotten MAC starts again with a full bucket")
	}
}

func TestRateLimiterOff(t *testing.T) {
	l := newRateLimiter(0, time.Second, nil)
	for range 100 {
		if !l.allow("a") {
			t.Fatal("a zero burst limits nothing")
		}
	}
}
