package dhcp

import (
	"sync"
	"time"
)

// rateLimiter is a token bucket per MAC: a machine stuck in a PXE loop, or
// a flood with forged MACs, costs the server (and the database, in full
// mode) at most burst answers and then one per interval each.
type rateLimiter struct {
	burst    float64
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds the limiter's memory; past it, buckets that have refilled
// (their MACs quiet) are forgotten.
const maxBuckets = 4096

func newRateLimiter(burst int, interval time.Duration, now func() time.Time) *rateLimiter {
	if now == nil {
		now = time.Now
	}
	return &rateLimiter{burst: float64(burst), interval: interval, now: now, buckets: map[string]*bucket{}}
}

// allow takes a token of mac's bucket, if it has one.
func (l *rateLimiter) allow(mac string) bool {
	if l == nil || l.burst <= 0 {
		return true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[mac]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.forgetFull(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[mac] = b
	}
	b.refill(now, l.burst, l.interval)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *bucket) refill(now time.Time, burst float64, interval time.Duration) {
	if el := now.Sub(b.last); el > 0 && interval > 0 {
		b.tokens = min(burst, b.tokens+float64(el)/float64(interval))
	}
	b.last = now
}

func (l *rateLimiter) forgetFull(now time.Time) {
	for mac, b := range l.buckets {
		b.refill(now, l.burst, l.interval)
		if b.tokens >= l.burst {
			delete(l.buckets, mac)
		}
	}
}
