package api

import (
	"context"
	"errors"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// DefaultLockWait is how long a request waits for a conductor to release a
// node before answering 409 NodeLocked. Ironic's conductor retries taking a
// node's lock (node_locked_retry_attempts 3, node_locked_retry_interval 1 s)
// before it gives up, so a client that acts the moment a node settles (the
// flow has committed the state but not yet released the reservation, or a
// power-state read holds the node for a moment) gets its answer rather than
// a 409 it must retry.
const DefaultLockWait = 3 * time.Second

// nodeLocked is the 409 of a request that found the node reserved.
func nodeLocked(uuid, holder string) *Error {
	e := conflict("Node %s is locked by host %s, please retry after the current operation is completed.", uuid, holder)
	e.locked = true
	return e
}

// updateUnlocked is store.UpdateNode for requests that fn refuses with
// nodeLocked while a conductor holds the node: it tries again, backing off,
// until the node is free or s.lockWait has passed. fn may run more than once.
func (s *Server) updateUnlocked(ctx context.Context, ident string, fn func(n *proto.Node) error) (*proto.Node, error) {
	return s.untilUnlocked(ctx, func() (*proto.Node, error) { return s.store.UpdateNode(ctx, ident, fn) })
}

// untilUnlocked runs update, again while it fails with nodeLocked, as
// updateUnlocked does.
func (s *Server) untilUnlocked(ctx context.Context, update func() (*proto.Node, error)) (*proto.Node, error) {
	deadline := time.Now().Add(s.lockWait)
	pause := 10 * time.Millisecond
	for {
		n, err := update()
		var e *Error
		if err == nil || !errors.As(err, &e) || !e.locked || !s.waitForLock(ctx, deadline, &pause) {
			return n, err
		}
	}
}

// waitForLock sleeps for *pause (doubling it, up to 250 ms) and reports
// whether another try fits before deadline.
func (s *Server) waitForLock(ctx context.Context, deadline time.Time, pause *time.Duration) bool {
	if s.lockWait <= 0 || time.Until(deadline) <= 0 {
		return false
	}
	t := time.NewTimer(min(*pause, time.Until(deadline)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	*pause = min(2**pause, 250*time.Millisecond)
	return true
}
