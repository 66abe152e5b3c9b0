package ratelimit

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// clock is a fake clock the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time         { return c.t }
func (c *clock) add(d time.Duration)    { c.t = c.t.Add(d) }
func addr(s string) netip.Addr          { return netip.MustParseAddr(s) }
func newClock() *clock                  { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func allowed(l *Limiter, a string) bool { return l.Allow(addr(a)).Allowed }

func TestBurstThenRate(t *testing.T) {
	c := newClock()
	l := New(Config{Rate: 2, Burst: 3, Now: c.now})
	for i := range 3 {
		if !allowed(l, "10.0.0.1") {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	v := l.Allow(addr("10.0.0.1"))
	if v.Allowed || !v.FirstRefusal || v.RetryAfter != time.Second {
		t.Fatalf("4th request at once: %+v, want refused, first refusal, retry after 1s", v)
	}
	if v := l.Allow(addr("10.0.0.1")); v.Allowed || v.FirstRefusal {
		t.Fatalf("5th request: %+v, want refused and not the first refusal", v)
	}
	if !allowed(l, "10.0.0.2") {
		t.Fatal("another address is limited by the first one's bucket")
	}
	c.add(500 * time.Millisecond) // one token at 2/s
	if !allowed(l, "10.0.0.1") {
		t.Fatal("refused after the bucket refilled one token")
	}
	if allowed(l, "10.0.0.1") {
		t.Fatal("allowed beyond the refilled token")
	}
	c.add(time.Hour)
	for i := range 3 {
		if !allowed(l, "10.0.0.1") {
			t.Fatalf("after a quiet hour, request %d of the burst refused", i+1)
		}
	}
}

func TestSlowRateRetryAfter(t *testing.T) {
	c := newClock()
	l := New(Config{Rate: 0.1, Burst: 1, Now: c.now})
	allowed(l, "192.0.2.1")
	if v := l.Allow(addr("192.0.2.1")); v.Allowed || v.RetryAfter != 10*time.Second {
		t.Fatalf("got %+v, want refused with retry after 10s", v)
	}
}

func TestDisabled(t *testing.T) {
	l := New(Config{Rate: 0, Burst: 1})
	for range 100 {
		if !allowed(l, "10.0.0.1") {
			t.Fatal("a limiter with rate 0 refused a request")
		}
	}
	var nilLimiter *Limiter
	if !nilLimiter.Allow(addr("10.0.0.1")).Allowed {
		t.Fatal("a nil limiter refused a request")
	}
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"10.0.0.1", "10.0.0.1", true},
		{"10.0.0.1", "10.0.0.2", false},
		{"10.0.0.1", "::ffff:10.0.0.1", true},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", true},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", false},
	} {
		if got := Key(addr(tc.a)) == Key(addr(tc.b)); got != tc.same {
			t.Errorf("Key(%s) == Key(%s) is %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

func TestIPv6HostsOfOneNetworkShareABucket(t *testing.T) {
	c := newClock()
	l := New(Config{Rate: 1, Burst: 2, Now: c.now})
	if !allowed(l, "2001:db8::1") || !allowed(l, "2001:db8::2") {
		t.Fatal("burst refused")
	}
	if allowed(l, "2001:db8::3") {
		t.Fatal("a third address of the same /64 got past the shared bucket")
	}
}

func TestBoundedSize(t *testing.T) {
	c := newClock()
	l := New(Config{Rate: 1, Burst: 1, MaxAddresses: 100, Now: c.now})
	for i := range 1000 {
		allowed(l, fmt.Sprintf("10.0.%d.%d", i/256, i%256))
		if l.Len() > 100 {
			t.Fatalf("%d buckets after %d addresses, bound is 100", l.Len(), i+1)
		}
	}
	// Refilled buckets (quiet addresses) are dropped first: a busy address
	// keeps its empty bucket while others can make room, so it cannot reset
	// its limit by making the map overflow.
	c.add(time.Minute)
	allowed(l, "10.9.9.9") // empties its bucket
	for i := range 99 {
		allowed(l, fmt.Sprintf("10.1.%d.%d", i/256, i%256))
	}
	if allowed(l, "10.9.9.9") {
		t.Error("the busy address's empty bucket was dropped while refilled ones could go")
	}
}
