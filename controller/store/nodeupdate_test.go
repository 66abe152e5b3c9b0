package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// interleave makes every optimistic UpdateNode of s run write (through
// s, outside the hook) between its read and its conditional UPDATE, the
// first times times; it returns how many times write ran.
func interleave(t *testing.T, s Store, times int, write func(ctx context.Context, uuid string) error) *int {
	t.Helper()
	ss, ok := s.(*sqlStore)
	if !ok {
		t.Fatalf("store is %T, want *sqlStore", s)
	}
	ran := 0
	inHook := false
	ss.beforeNodeWrite = func(uuid string) {
		if inHook || ran >= times {
			return
		}
		inHook = true
		defer func() { inHook = false }()
		ran++
		if err := write(context.Background(), uuid); err != nil {
			t.Errorf("intervening write: %v", err)
		}
	}
	t.Cleanup(func() { ss.beforeNodeWrite = nil })
	return &ran
}

// setExtra is an UpdateNode function setting extra[key] = val.
func setExtra(key string, val any) func(n *proto.Node) error {
	return func(n *proto.Node) error {
		n.Extra[key] = val
		return nil
	}
}

func TestUpdateNodeRetriesAfterInterveningWrite(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		n := mustCreate(t, s, newNode("race"))
		ran := interleave(t, s, 1, func(ctx context.Context, uuid string) error {
			_, err := s.UpdateNode(ctx, uuid, setExtra("theirs", "x"))
			return err
		})
		c, _ := WriteCounterOf(s)
		before := c.WriteCounts()
		var seen []any
		got, err := s.UpdateNode(ctx, n.UUID, func(n *proto.Node) error {
			seen = append(seen, n.Extra["theirs"])
			n.Extra["mine"] = "y"
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if *ran != 1 {
			t.Fatalf("the intervening write ran %d times, want 1", *ran)
		}
		// The first run of fn saw the node before the other write, the
		// retry after it; the first result was not written.
		if len(seen) != 2 || seen[0] != nil || seen[1] != "x" {
			t.Fatalf("fn saw extra.theirs = %v, want [<nil> x]", seen)
		}
		// Theirs and mine were written; the first try of mine was lost.
		after := c.WriteCounts()
		if d, l := after["update_node"]-before["update_node"], after["update_node_lost"]-before["update_node_lost"]; d != 2 || l != 1 {
			t.Errorf("update_node +%d, update_node_lost +%d; want +2 and +1", d, l)
		}
		if got.Extra["theirs"] != "x" || got.Extra["mine"] != "y" {
			t.Fatalf("returned extra = %v, want both writes", got.Extra)
		}
		stored, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Extra["theirs"] != "x" || stored.Extra["mine"] != "y" {
			t.Fatalf("stored extra = %v, want both writes", stored.Extra)
		}
	})
}

// A write that loses every optimistic race still lands: after
// optimisticAttempts it holds the row.
func TestUpdateNodeFallsBackToLock(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		n := mustCreate(t, s, newNode("loser"))
		ran := interleave(t, s, optimisticAttempts+5, func(ctx context.Context, uuid string) error {
			_, err := s.UpdateNode(ctx, uuid, func(n *proto.Node) error {
				c, _ := n.Extra["theirs"].(float64)
				n.Extra["theirs"] = c + 1
				return nil
			})
			return err
		})
		calls := 0
		got, err := s.UpdateNode(ctx, n.UUID, func(n *proto.Node) error {
			calls++
			n.Extra["mine"] = calls
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if *ran != optimisticAttempts {
			t.Fatalf("the intervening write ran %d times, want %d (one per optimistic attempt)", *ran, optimisticAttempts)
		}
		if calls != optimisticAttempts+1 {
			t.Fatalf("fn ran %d times, want %d", calls, optimisticAttempts+1)
		}
		stored, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Extra["theirs"] != float64(optimisticAttempts) || stored.Extra["mine"] != float64(calls) {
			t.Fatalf("stored extra = %v, want theirs=%d mine=%d", stored.Extra, optimisticAttempts, calls)
		}
		if got.Extra["mine"] != calls {
			t.Fatalf("returned extra = %v", got.Extra)
		}
	})
}

// A reservation taken between the read and the write survives the update
// (UpdateNode writes the reservation column when fn's node differs from
// the row it read).
func TestUpdateNodeKeepsInterveningReservation(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		if err := s.RegisterConductor(ctx, Conductor{Hostname: "c1"}); err != nil {
			t.Fatal(err)
		}
		n := mustCreate(t, s, newNode("held"))
		interleave(t, s, 1, func(ctx context.Context, uuid string) error {
			_, err := s.Reserve(ctx, uuid, "c1")
			return err
		})
		if _, err := s.UpdateNode(ctx, n.UUID, setExtra("k", "v")); err != nil {
			t.Fatal(err)
		}
		stored, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Reservation == nil || *stored.Reservation != "c1" || stored.Extra["k"] != "v" {
			t.Fatalf("reservation = %v, extra = %v; want c1 and k=v", stored.Reservation, stored.Extra)
		}
	})
}

// A node deleted between the read and the write is not found, and fn's
// errors come back unchanged.
func TestUpdateNodeErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		n := mustCreate(t, s, newNode("doomed"))
		mustCreate(t, s, newNode("other"))
		mine := errors.New("refused")
		if _, err := s.UpdateNode(ctx, n.UUID, func(*proto.Node) error { return mine }); err != mine {
			t.Fatalf("fn's error came back as %v, want it unchanged", err)
		}
		_, err := s.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.Name = ptr("other"); return nil })
		if !errors.Is(err, ErrDuplicateName) {
			t.Fatalf("renaming to a taken name: %v, want ErrDuplicateName", err)
		}
		interleave(t, s, 1, func(ctx context.Context, uuid string) error {
			return s.DeleteNode(ctx, uuid)
		})
		if _, err := s.UpdateNode(ctx, n.UUID, setExtra("k", "v")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("updating a node deleted meanwhile: %v, want ErrNotFound", err)
		}
	})
}

// History written with an update lands once, with the node as it stood
// before the update, whether the update wins at once, retries after a
// lost race, or falls back to the lock; nothing lands when fn refuses.
func TestUpdateNodeWithHistory(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		hw := s.(NodeHistoryWriter)
		for i, tc := range []struct {
			name  string
			races int
		}{{"at once", 0}, {"after a lost race", 1}, {"under the lock", optimisticAttempts}} {
			t.Run(tc.name, func(t *testing.T) {
				n := mustCreate(t, s, newNode(fmt.Sprintf("h%d", i), func(n *proto.Node) {
					n.ProvisionState, n.TargetProvisionState = proto.StateCleaning, ptr(proto.StateAvailable)
				}))
				interleave(t, s, tc.races, func(ctx context.Context, uuid string) error {
					_, err := s.UpdateNode(ctx, uuid, setExtra("theirs", "x"))
					return err
				})
				mk := func(msg string) proto.HistoryEvent {
					return proto.HistoryEvent{UUID: newNode("x").UUID, CreatedAt: wireTime(time.Now()), Severity: "INFO", Event: msg}
				}
				if _, err := hw.UpdateNodeWithHistory(ctx, n.UUID, func(*proto.Node) error { return ErrBadQuery },
					[]proto.HistoryEvent{mk("refused")}); !errors.Is(err, ErrBadQuery) {
					t.Fatalf("fn's error came back as %v", err)
				}
				got, err := hw.UpdateNodeWithHistory(ctx, n.UUID, func(n *proto.Node) error {
					n.ProvisionState, n.TargetProvisionState = proto.StateAvailable, nil
					return nil
				}, []proto.HistoryEvent{mk("one"), mk("two")})
				if err != nil {
					t.Fatal(err)
				}
				if want := map[bool]any{true: "x", false: nil}[tc.races > 0]; got.ProvisionState != proto.StateAvailable || got.Extra["theirs"] != want {
					t.Fatalf("node after: %s, extra.theirs %v; want available, %v", got.ProvisionState, got.Extra["theirs"], want)
				}
				h, err := s.ListHistory(ctx, n.UUID)
				if err != nil {
					t.Fatal(err)
				}
				if len(h) != 2 || h[0].Event != "one" || h[1].Event != "two" {
					t.Fatalf("history = %+v, want events one and two once", h)
				}
				for _, ev := range h {
					if ev.State != string(proto.StateCleaning) || ev.TargetProvisionState == nil || *ev.TargetProvisionState != string(proto.StateAvailable) {
						t.Errorf("event %q recorded state %q target %v, want the node before the update (cleaning → available)", ev.Event, ev.State, ev.TargetProvisionState)
					}
				}
			})
		}
	})
}
