package agent

import (
	"io"
	"log/slog"
	"sync"
)

// Ring keeps the last Size bytes written to it: the agent's log as
// log.collect_system_logs returns it, without files (the ramdisk's / is RAM).
type Ring struct {
	mu   sync.Mutex
	buf  []byte
	size int
	full bool
	pos  int
}

// NewRing returns a ring of size bytes.
func NewRing(size int) *Ring { return &Ring{buf: make([]byte, size), size: size} }

// Write appends p, overwriting the oldest bytes when full.
func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if len(p) >= r.size {
		copy(r.buf, p[len(p)-r.size:])
		r.pos, r.full = 0, true
		return n, nil
	}
	c := copy(r.buf[r.pos:], p)
	if c < len(p) {
		copy(r.buf, p[c:])
		r.full = true
	}
	r.pos = (r.pos + len(p)) % r.size
	if r.pos == 0 && len(p) > 0 {
		r.full = true
	}
	return n, nil
}

// Bytes returns the buffered bytes, oldest first.
func (r *Ring) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]byte(nil), r.buf[:r.pos]...)
	}
	out := make([]byte, 0, r.size)
	out = append(out, r.buf[r.pos:]...)
	return append(out, r.buf[:r.pos]...)
}

// NewLogger logs text to console and ring at level.
func NewLogger(console io.Writer, ring *Ring, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.MultiWriter(ring, console), &slog.HandlerOptions{Level: level}))
}
