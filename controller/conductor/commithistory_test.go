package conductor

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// History a pass records goes into the database with the pass's next
// commit, in the same write, as the node stood before that commit (what
// AddHistory at the time of the event saw); history with no change to
// commit is added on its own.
func TestPassHistoryRidesTheCommit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool
	}{{"store", false}, {"watched store", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			base, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { base.Close() })
			st := base
			if tc.watch {
				st = events.Watch(base)
			}
			target := proto.StateAvailable
			n := &proto.Node{UUID: "5d0b0f3e-1c52-4f0e-8c47-3b1f4f1f7a21", Driver: "fake-hardware", ProvisionState: proto.StateCleaning,
				TargetProvisionState: &target, Extra: proto.Dict{}, DriverInternalInfo: proto.Dict{}}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			c := New(Config{Store: st, Name: "c1"})
			counts, _ := store.WriteCounterOf(st)
			before := counts.WriteCounts()
			f := &flow{c: c, n: n}
			for _, a := range []decide.Action{
				decide.History{Severity: "INFO", Event: "first"},
				decide.Update{Move: state.EvFail, Node: func(n *proto.Node) { msg := "boom"; n.LastError = &msg }},
				decide.History{Severity: "ERROR", Event: "second"},
			} {
				if _, err := f.do(ctx, a); err != nil {
					t.Fatalf("%T: %v", a, err)
				}
			}
			if h, _ := st.ListHistory(ctx, n.UUID); len(h) != 0 {
				t.Fatalf("history before the commit: %+v", h)
			}
			if err := f.commit(ctx); err != nil {
				t.Fatal(err)
			}
			after := counts.WriteCounts()
			if u, h := after["update_node"]-before["update_node"], after["history"]-before["history"]; u != 1 || h != 0 {
				t.Errorf("the commit took %d node writes and %d history writes, want 1 and 0", u, h)
			}
			h, err := st.ListHistory(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != 2 || h[0].Event != "first" || h[1].Event != "second" || h[1].Severity != "ERROR" || h[0].Conductor != "c1" {
				t.Fatalf("history = %+v, want first and second", h)
			}
			for _, ev := range h {
				if ev.State != string(proto.StateCleaning) {
					t.Errorf("event %q recorded state %q, want cleaning (the node before the commit)", ev.Event, ev.State)
				}
			}
			stored, err := st.GetNode(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.ProvisionState != proto.StateCleanFailed {
				t.Fatalf("node is %s, want clean failed", stored.ProvisionState)
			}
			// Nothing else to commit: the event is added on its own.
			if _, err := f.do(ctx, decide.History{Severity: "INFO", Event: "third"}); err != nil {
				t.Fatal(err)
			}
			if err := f.commit(ctx); err != nil {
				t.Fatal(err)
			}
			if h, _ := st.ListHistory(ctx, n.UUID); len(h) != 3 || h[2].Event != "third" || h[2].State != string(proto.StateCleanFailed) {
				t.Fatalf("history = %+v, want third recorded in clean failed", h)
			}
			if got := counts.WriteCounts()["history"] - after["history"]; got != 1 {
				t.Errorf("the lone event took %d history writes, want 1", got)
			}
		})
	}
}
