package store

import (
	"context"
	"crypto/sha256"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/stdlib"
)

// Waker carries wake-ups between the controllers sharing a store: one
// controller records a request or a heartbeat for a node another owns and
// wakes the owner at once instead of leaving it to the owner's next scan.
// PostgreSQL's LISTEN/NOTIFY carries them; a store one controller has
// alone (SQLite) has none (WakerOf returns nil).
//
// Delivery is best effort: a notification sent while the listener is
// reconnecting is lost, and the owner's scan finds the node as before.
type Waker interface {
	// Wake sends payload to conductor, which sees it after every write
	// committed before the call.
	Wake(ctx context.Context, conductor, payload string) error
	// Listen calls ready once conductor's wake-ups are listened to, then
	// got with each payload sent to it, until ctx ends or the connection
	// fails; it returns why it stopped.
	Listen(ctx context.Context, conductor string, ready func(), got func(payload string)) error
}

// WakePayloadMax is the largest payload Wake sends: PostgreSQL refuses
// 8000 bytes and more.
const WakePayloadMax = 7900

// WakerOf returns s's Waker, or nil when s is not shared (SQLite).
func WakerOf(s Store) Waker {
	if ss, ok := s.(*sqlStore); ok && ss.d == postgresDialect {
		return &pgWaker{s: ss}
	}
	return nil
}

type pgWaker struct {
	s  *sqlStore
	mu sync.Mutex
	ns string // database.schema, once read
}

// channel is conductor's notification channel. Channels are shared by a
// whole PostgreSQL cluster, so the name also hashes the database and
// schema: Kilns on other schemas (and tests in parallel) never hear each
// other. It is an identifier of fixed length whatever the name holds.
func (w *pgWaker) channel(ctx context.Context, conductor string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ns == "" {
		err := w.s.rdb.QueryRowContext(ctx, "SELECT current_database() || '.' || current_schema()").Scan(&w.ns)
		if err != nil {
			return "", fmt.Errorf("wake channel: %w", err)
		}
	}
	sum := sha256.Sum256([]byte(w.ns + "\x00" + conductor))
	return "kiln_wake_" + hex.EncodeToString(sum[:16]), nil
}

func (w *pgWaker) Wake(ctx context.Context, conductor, payload string) error {
	channel, err := w.channel(ctx, conductor)
	if err != nil {
		return err
	}
	if len(payload) > WakePayloadMax {
		return fmt.Errorf("wake: payload of %d bytes exceeds %d", len(payload), WakePayloadMax)
	}
	if _, err := w.s.wdb.ExecContext(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		return fmt.Errorf("wake %s: %w", channel, err)
	}
	return nil
}

// Listen holds one connection of the pool for as long as it listens; the
// connection is closed, not returned to the pool, when it stops, so that
// no other query runs on a connection still subscribed to channel.
func (w *pgWaker) Listen(ctx context.Context, conductor string, ready func(), got func(string)) error {
	channel, err := w.channel(ctx, conductor)
	if err != nil {
		return err
	}
	conn, err := w.s.wdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("listen %s: %w", channel, err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("listen: connection is a %T, not pgx", dc)
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, `LISTEN "`+channel+`"`); err != nil {
			return discard{err}
		}
		ready()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return discard{err}
			}
			got(n.Payload)
		}
	})
	if d, ok := errors.AsType[discard](err); ok {
		err = d.error
	}
	return fmt.Errorf("listen %s: %w", channel, err)
}

// discard is an error that makes database/sql close the connection it
// came from (it is driver.ErrBadConn) rather than reuse it.
type discard struct{ error }

func (discard) Is(target error) bool { return target == driver.ErrBadConn }
