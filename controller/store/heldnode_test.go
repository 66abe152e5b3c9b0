package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// countReads counts the node reads UpdateNode makes on s from now on.
func countReads(t *testing.T, s Store) *atomic.Int32 {
	t.Helper()
	ss := s.(*sqlStore)
	var reads atomic.Int32
	ss.onNodeRead = func(string) { reads.Add(1) }
	t.Cleanup(func() { ss.onNodeRead = nil })
	return &reads
}

// heldStore opens a store on dsn with conductors c1 and c2 alive and one
// fleet-shaped node.
func heldStore(t *testing.T, dsn string) (Store, HeldNodeWriter, *proto.Node) {
	t.Helper()
	s := openT(t, dsn, Options{})
	for _, c := range []string{"c1", "c2"} {
		if err := s.RegisterConductor(context.Background(), Conductor{Hostname: c}); err != nil {
			t.Fatal(err)
		}
	}
	n := mustCreate(t, s, newNode("held", fleetShaped, func(n *proto.Node) { n.Extra = proto.Dict{} }))
	return s, s.(HeldNodeWriter), n
}

// releaseAs is the conductor's releasing commit: it refuses a node that
// is no longer reserved by me.
func releaseAs(me string) func(n *proto.Node) error {
	return func(n *proto.Node) error {
		if n.Reservation == nil || *n.Reservation != me {
			return errNotReserved
		}
		n.Reservation = nil
		return nil
	}
}

var errNotReserved = errors.New("not reserved by me")

func historyEvent(msg string) proto.HistoryEvent {
	return proto.HistoryEvent{UUID: newNode("x").UUID, CreatedAt: wireTime(time.Now()), Severity: "INFO", Event: msg}
}

// A pass's commits from the version it holds read nothing: not the row,
// whatever they change (a column, the document, history, the
// reservation), and each gives the next one its version.
func TestHeldCommitsReadNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, hw, n := heldStore(t, dsn)
		reads := countReads(t, s)
		got, held, err := hw.ReserveHeld(ctx, n.UUID, "c1")
		if err != nil || held == nil {
			t.Fatalf("ReserveHeld = %v, %v", held, err)
		}
		if got.Reservation == nil || *got.Reservation != "c1" || got.DriverInfo["redfish_address"] == nil {
			t.Fatalf("reserved node: reservation %v, driver_info %v", got.Reservation, got.DriverInfo)
		}
		got.Extra["caller's"] = "not stored" // the caller's copy is not the store's
		steps := []struct {
			fn     func(n *proto.Node) error
			events []proto.HistoryEvent
		}{
			{setExtra("one", "1"), nil},
			{func(n *proto.Node) error {
				n.ProvisionState, n.TargetProvisionState = proto.StateCleanWait, ptr(proto.StateAvailable)
				return nil
			}, []proto.HistoryEvent{historyEvent("waiting")}},
			{setExtra("two", "2"), nil},
			{releaseAs("c1"), nil},
		}
		for i, st := range steps {
			if got, held, err = hw.UpdateHeldNode(ctx, n.UUID, held, st.fn, st.events); err != nil || held == nil {
				t.Fatalf("commit %d: held %v, err %v", i, held, err)
			}
		}
		if r := reads.Load(); r != 0 {
			t.Fatalf("the held commits read the node %d times, want none", r)
		}
		if got.Reservation != nil || got.Extra["one"] != "1" || got.Extra["two"] != "2" || got.Extra["caller's"] != nil {
			t.Fatalf("returned node: reservation %v, extra %v", got.Reservation, got.Extra)
		}
		stored, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Reservation != nil || stored.ProvisionState != proto.StateCleanWait || stored.Extra["one"] != "1" ||
			stored.Extra["two"] != "2" || len(stored.Extra) != 2 || stored.DriverInfo["redfish_address"] != "http://127.20.1.95:44277" {
			t.Fatalf("stored node: reservation %v, state %s, extra %v", stored.Reservation, stored.ProvisionState, stored.Extra)
		}
		// History rides its commit, recording the node before it.
		h, err := s.ListHistory(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 1 || h[0].Event != "waiting" || h[0].State != string(proto.StateCleaning) {
			t.Fatalf("history = %+v, want one event recorded in cleaning", h)
		}
		// The columns followed: the list by state finds it, by
		// reservation does not.
		list, err := s.ListNodes(ctx, NodeQuery{ProvisionState: string(proto.StateCleanWait)})
		if err != nil || len(list) != 1 {
			t.Fatalf("list in clean wait: %d nodes, %v", len(list), err)
		}
		// The last version given is the row's: one more commit from it
		// reads nothing either.
		if _, _, err := hw.UpdateHeldNode(ctx, n.UUID, held, setExtra("three", "3"), nil); err != nil {
			t.Fatal(err)
		}
		if r := reads.Load(); r != 0 {
			t.Fatalf("a commit from the last version read the node %d times", r)
		}
	})
}

// A write between two held commits makes the second read the node again
// and run fn on it: the intervening change is kept.
func TestHeldCommitFallsBackAfterInterveningWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, s Store, uuid string)
		// check checks the node stored after the held commit, whose
		// error was err.
		check func(t *testing.T, n *proto.Node, err error)
	}{
		{"UpdateNode", func(t *testing.T, s Store, uuid string) {
			if _, err := s.UpdateNode(context.Background(), uuid, setExtra("theirs", "x")); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, n *proto.Node, err error) {
			if err != nil || n.Extra["theirs"] != "x" || n.Extra["mine"] != "y" || n.Reservation != nil {
				t.Fatalf("stored extra %v reservation %v, err %v; want both writes, released", n.Extra, n.Reservation, err)
			}
		}},
		{"reservation broken", func(t *testing.T, s Store, uuid string) {
			ctx := context.Background()
			if err := s.Release(ctx, uuid, "c1"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Reserve(ctx, uuid, "c2"); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, n *proto.Node, err error) {
			if !errors.Is(err, errNotReserved) || n.Reservation == nil || *n.Reservation != "c2" || n.Extra["mine"] != nil {
				t.Fatalf("err %v, stored reservation %v extra %v; want refused, c2's, nothing written", err, n.Reservation, n.Extra)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, dsn string) {
				ctx := context.Background()
				s, hw, n := heldStore(t, dsn)
				_, held, err := hw.ReserveHeld(ctx, n.UUID, "c1")
				if err != nil {
					t.Fatal(err)
				}
				tc.write(t, s, n.UUID)
				reads := countReads(t, s)
				runs := 0
				_, _, err = hw.UpdateHeldNode(ctx, n.UUID, held, func(n *proto.Node) error {
					runs++
					n.Extra["mine"] = "y"
					return releaseAs("c1")(n)
				}, []proto.HistoryEvent{historyEvent("mine")})
				if r := reads.Load(); r != 1 || runs != 2 {
					t.Fatalf("the commit read the node %d times and ran fn %d times, want 1 and 2", r, runs)
				}
				stored, gerr := s.GetNode(ctx, n.UUID)
				if gerr != nil {
					t.Fatal(gerr)
				}
				tc.check(t, stored, err)
				h, herr := s.ListHistory(ctx, n.UUID)
				if herr != nil {
					t.Fatal(herr)
				}
				if want := map[bool]int{true: 1, false: 0}[err == nil]; len(h) != want {
					t.Fatalf("history has %d events, want %d (with the commit, once)", len(h), want)
				}
			})
		})
	}
}

// A narrow heartbeat stamp recorded while the node is held does not bump
// its version: the held commit writes at once, its document's older
// agent_last_heartbeat with it, and readers still see the newer stamp.
func TestHeldCommitKeepsNewerHeartbeatStamp(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock, s, n := nodeAwaitingAgent(t, dsn, "5d1c7a4e-2b3c-4d5e-8f90-a1b2c3d4e5f6", proto.StateCleanWait)
		if err := s.RegisterConductor(ctx, Conductor{Hostname: "c1"}); err != nil {
			t.Fatal(err)
		}
		first := clock.Now().Truncate(time.Microsecond)
		if _, err := s.UpdateNode(ctx, n.UUID, func(n *proto.Node) error {
			n.DriverInternalInfo[proto.InfoAgentLastHeartbeat] = first.Format(time.RFC3339Nano)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		hw := s.(HeldNodeWriter)
		_, held, err := hw.ReserveHeld(ctx, n.UUID, "c1")
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.AgentOf(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		later := first.Add(time.Minute)
		if ok, err := s.(*sqlStore).RecordSeen(ctx, v, later); err != nil || !ok {
			t.Fatalf("RecordSeen = %v, %v", ok, err)
		}
		reads := countReads(t, s)
		if _, _, err := hw.UpdateHeldNode(ctx, n.UUID, held, releaseAs("c1"), nil); err != nil {
			t.Fatal(err)
		}
		if r := reads.Load(); r != 0 {
			t.Fatalf("the commit read the node %d times, want none (a stamp does not change the version)", r)
		}
		stored, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got := stored.DriverInternalInfo[proto.InfoAgentLastHeartbeat]; got != later.UTC().Format(time.RFC3339Nano) {
			t.Fatalf("agent_last_heartbeat read %v, want the newer stamp %v", got, later.UTC().Format(time.RFC3339Nano))
		}
		if a, err := s.AgentOf(ctx, n.UUID); err != nil || !a.LastHeartbeat.Equal(later) {
			t.Fatalf("AgentOf last heartbeat %v (%v), want %v", a.LastHeartbeat, err, later)
		}
	})
}

// fn's error writes nothing, and the version held stays the row's.
func TestHeldCommitErrorWritesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, hw, n := heldStore(t, dsn)
		_, held, err := hw.ReserveHeld(ctx, n.UUID, "c1")
		if err != nil {
			t.Fatal(err)
		}
		c, _ := WriteCounterOf(s)
		before := c.WriteCounts()
		reads := countReads(t, s)
		boom := errors.New("boom")
		if _, _, err := hw.UpdateHeldNode(ctx, n.UUID, held, func(n *proto.Node) error {
			n.Extra["lost"] = true
			return boom
		}, []proto.HistoryEvent{historyEvent("lost")}); !errors.Is(err, boom) {
			t.Fatalf("fn's error came back as %v", err)
		}
		if after := c.WriteCounts(); !reflect.DeepEqual(before, after) {
			t.Fatalf("writes %v → %v, want none", before, after)
		}
		if _, _, err := hw.UpdateHeldNode(ctx, n.UUID, held, releaseAs("c1"), nil); err != nil {
			t.Fatal(err)
		}
		if r := reads.Load(); r != 0 {
			t.Fatalf("read the node %d times, want none", r)
		}
		stored, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := s.ListHistory(ctx, n.UUID)
		if stored.Extra["lost"] != nil || stored.Reservation != nil || len(h) != 0 {
			t.Fatalf("stored extra %v reservation %v history %d; want only the release", stored.Extra, stored.Reservation, len(h))
		}
	})
}

// Held commits and API writes racing on one node all land, whoever
// wins each race.
func TestHeldCommitsRaceUpdates(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, hw, n := heldStore(t, dsn)
		_, held, err := hw.ReserveHeld(ctx, n.UUID, "c1")
		if err != nil {
			t.Fatal(err)
		}
		const k = 20
		incr := func(key string) func(n *proto.Node) error {
			return func(n *proto.Node) error {
				c, _ := n.Extra[key].(float64)
				n.Extra[key] = c + 1
				return nil
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for range k {
				if _, err := s.UpdateNode(ctx, n.UUID, incr("theirs")); err != nil {
					t.Error(err)
					return
				}
			}
		})
		for i := range k {
			if _, held, err = hw.UpdateHeldNode(ctx, n.UUID, held, incr("mine"), []proto.HistoryEvent{historyEvent(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		stored, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.ListHistory(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Extra["mine"] != float64(k) || stored.Extra["theirs"] != float64(k) || len(h) != k {
			t.Fatalf("stored extra %v, %d events; want mine=theirs=%d and %d events", stored.Extra, len(h), k, k)
		}
	})
}

// cloneNode copies every level: changing the copy's dictionaries,
// lists, pointers and times leaves the original as it was, and the copy
// starts equal.
func TestCloneNode(t *testing.T) {
	n := newNode("orig", fleetShaped, func(n *proto.Node) {
		n.Extra = proto.Dict{"list": []any{map[string]any{"a": 1.0}}, "n": 2.0}
		n.Name = ptr("orig")
		n.Traits = []string{"CUSTOM_A"}
	})
	want := deepCopyJSON(t, n)
	c := cloneNode(n)
	if !reflect.DeepEqual(c, n) {
		t.Fatalf("the copy differs:\n%+v\n%+v", c, n)
	}
	c.Extra["list"].([]any)[0].(map[string]any)["a"] = 2.0
	c.DriverInternalInfo["clean_steps"].([]any)[0].(map[string]any)["step"] = "x"
	c.DriverInfo["redfish_password"] = "changed"
	*c.Name = "copy"
	c.Traits[0] = "CUSTOM_B"
	c.ProvisionUpdatedAt.Time = c.ProvisionUpdatedAt.Add(time.Hour)
	*c.TargetProvisionState = proto.StateActive
	if got := deepCopyJSON(t, n); !reflect.DeepEqual(got, want) {
		t.Fatalf("changing the copy changed the original:\n%v\nwant\n%v", got, want)
	}
}

func deepCopyJSON(t *testing.T, n *proto.Node) string {
	t.Helper()
	vals, err := nodeValues(n)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(vals...) + fmt.Sprint(*n.Name, n.Traits)
}
