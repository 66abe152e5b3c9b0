// Package ratelimit limits how often each source address may call an
// endpoint: one token bucket per address (IPv6 addresses grouped by /64, as
// one host usually holds a whole /64), in a map of bounded size so that a
// flood of forged sources cannot grow memory without end.
//
// It guards the agent endpoints that anyone on the provisioning network can
// call without a credential (/v1/lookup, /v1/continue_inspection): a
// stranger guessing MAC addresses to claim a node's agent token is slowed
// to the bucket's rate.
package ratelimit

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Config sets the buckets. A Rate of 0 or less allows everything.
type Config struct {
	// Rate is the sustained requests per second allowed per address.
	Rate float64
	// Burst is how many requests an address may make at once (at least 1).
	Burst int
	// MaxAddresses bounds the number of buckets kept (default 10000).
	MaxAddresses int
	// Now is the clock (default time.Now); tests pass a fake one.
	Now func() time.Time
}

// Limiter hands out requests per address. The zero value is not usable; use New.
type Limiter struct {
	cfg Config

	mu      sync.Mutex
	buckets map[netip.Prefix]*bucket
}

type bucket struct {
	lim *rate.Limiter
	// warned is set once a refusal was reported, until a request passes again.
	warned bool
}

// New returns a limiter with cfg's settings.
func New(cfg Config) *Limiter {
	if cfg.Burst < 1 {
		cfg.Burst = 1
	}
	if cfg.MaxAddresses <= 0 {
		cfg.MaxAddresses = 10000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{cfg: cfg, buckets: map[netip.Prefix]*bucket{}}
}

// Verdict is the answer for one request.
type Verdict struct {
	// Allowed says whether the request may proceed.
	Allowed bool
	// FirstRefusal is set on the first refusal since the address was last
	// allowed, so that callers log a flood once rather than per request.
	FirstRefusal bool
	// RetryAfter is how long until the address has a token again (refusals only).
	RetryAfter time.Duration
}

// Key is the bucket an address falls in: the address itself, or its /64
// for IPv6. An unparsable address shares one bucket with every other.
func Key(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap()
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p
	}
	if !addr.IsValid() {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(addr, addr.BitLen())
}

// Allow takes one token from addr's bucket.
func (l *Limiter) Allow(addr netip.Addr) Verdict {
	if l == nil || l.cfg.Rate <= 0 {
		return Verdict{Allowed: true}
	}
	now := l.cfg.Now()
	key := Key(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		l.makeRoom(now)
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)}
		l.buckets[key] = b
	}
	if b.lim.AllowN(now, 1) {
		b.warned = false
		return Verdict{Allowed: true}
	}
	v := Verdict{FirstRefusal: !b.warned}
	b.warned = true
	missing := 1 - b.lim.TokensAt(now)
	v.RetryAfter = time.Duration(missing / l.cfg.Rate * float64(time.Second))
	if v.RetryAfter < time.Second {
		v.RetryAfter = time.Second // Retry-After counts whole seconds
	}
	return v
}

// makeRoom keeps the map under MaxAddresses: buckets that refilled (their
// address has been quiet) go first, then arbitrary ones.
func (l *Limiter) makeRoom(now time.Time) {
	if len(l.buckets) < l.cfg.MaxAddresses {
		return
	}
	for k, b := range l.buckets {
		if b.lim.TokensAt(now) >= float64(l.cfg.Burst) {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < l.cfg.MaxAddresses {
			break
		}
		delete(l.buckets, k)
	}
}

// Len is the number of buckets kept.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
