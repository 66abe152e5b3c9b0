package redfish

import "time"

// SetBounds replaces the pool's bounds and clock (tests only).
func (p *Pool) SetBounds(maxConns int, idle time.Duration, now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maxConns, p.connIdle, p.now = maxConns, idle, now
}

// Accounts is how many BMC accounts the pool keeps (tests only).
func (p *Pool) Accounts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lru.Len()
}
