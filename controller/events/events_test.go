package events

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

func ev(uuid string, s proto.ProvisionState) Event {
	return Event{UUID: uuid, ProvisionState: s, Time: time.Now()}
}

func TestBusFilterAndOrder(t *testing.T) {
	b := NewBus()
	all := b.Subscribe(nil, 10)
	one := b.Subscribe(func(e Event) bool { return e.Matches([]string{"n1"}) }, 10)
	name := "n1"
	b.Publish(Event{UUID: "u1", Name: &name, ProvisionState: proto.StateDeploying})
	b.Publish(ev("u2", proto.StateCleaning))
	b.Publish(Event{UUID: "u1", Name: &name, ProvisionState: proto.StateActive})
	got := func(s *Subscription, n int) []string {
		var out []string
		for range n {
			e := <-s.Events()
			out = append(out, e.UUID+":"+string(e.ProvisionState))
		}
		return out
	}
	if g := fmt.Sprint(got(all, 3)); g != "[u1:deploying u2:cleaning u1:active]" {
		t.Errorf("all: %s", g)
	}
	if g := fmt.Sprint(got(one, 2)); g != "[u1:deploying u1:active]" {
		t.Errorf("filtered: %s", g)
	}
	select {
	case e := <-one.Events():
		t.Errorf("filtered subscriber got %+v", e)
	default:
	}
	one.Close()
	if b.Subscribers() != 1 {
		t.Errorf("subscribers after Close = %d, want 1", b.Subscribers())
	}
	b.Close()
	if _, ok := <-all.Events(); ok {
		t.Error("channel open after bus Close")
	}
	if _, ok := <-b.Subscribe(nil, 1).Events(); ok {
		t.Error("subscription on a closed bus is open")
	}
}

// A subscriber that never reads loses its oldest events; the publisher never
// waits for it and the newest events are the ones kept.
func TestSlowSubscriberDropsOldest(t *testing.T) {
	b := NewBus()
	slow := b.Subscribe(nil, 8)
	fast := b.Subscribe(nil, 1)
	const n = 100000
	done := make(chan struct{})
	go func() {
		for i := range n {
			b.Publish(ev(fmt.Sprint(i), proto.StateDeploying))
		}
		close(done)
	}()
	// The fast subscriber reads concurrently; the slow one not at all.
	go func() {
		for range fast.Events() {
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}
	if d := slow.TakeDropped(); d != n-8 {
		t.Errorf("dropped = %d, want %d", d, n-8)
	}
	if d := slow.TakeDropped(); d != 0 {
		t.Errorf("TakeDropped did not reset: %d", d)
	}
	first := <-slow.Events()
	if first.UUID != fmt.Sprint(n-8) {
		t.Errorf("oldest kept event = %s, want %d", first.UUID, n-8)
	}
	b.Close()
}

func TestWatchReportsVisibleChangesOnly(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var changes []Change
	w := Watch(st, func(c Change) { changes = append(changes, c) })
	name := "n1"
	n := &proto.Node{UUID: "9b0f3a4e-1111-4c1e-9f00-000000000001", Name: &name, Driver: "fake-hardware", ProvisionState: proto.StateEnroll,
		DriverInfo: proto.Dict{}, DriverInternalInfo: proto.Dict{}, InstanceInfo: proto.Dict{}, Properties: proto.Dict{}, Extra: proto.Dict{}}
	if err := w.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	upd := func(fn func(*proto.Node)) {
		t.Helper()
		if _, err := w.UpdateNode(ctx, "n1", func(n *proto.Node) error { fn(n); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	upd(func(n *proto.Node) { n.ProvisionState = proto.StateVerifying })
	upd(func(n *proto.Node) { n.DriverInternalInfo["agent_last_heartbeat"] = "x" }) // invisible
	upd(func(n *proto.Node) {
		flowstate.Update(n, func(s *flowstate.State) {
			s.Progress = &Progress{Step: "deploy.write_image", BytesDone: 10, BytesTotal: 100}
		})
		n.DeployStep = proto.Dict{"interface": "deploy", "step": "write_image"}
	})
	upd(func(n *proto.Node) { n.ProvisionState = proto.StateManageable })
	if err := w.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		s := string(c.After.ProvisionState)
		if c.After.Progress != nil {
			s += fmt.Sprintf("/%s:%d", c.After.Step, c.After.Progress.BytesDone)
		}
		if c.After.Deleted {
			s += "/deleted"
		}
		got = append(got, s)
	}
	want := "[enroll verifying verifying/deploy.write_image:10 manageable/deploy.write_image:10 manageable/deploy.write_image:10/deleted]"
	if fmt.Sprint(got) != want {
		t.Errorf("changes:\n got %v\nwant %s", got, want)
	}
	if changes[1].Before.ProvisionState != proto.StateEnroll {
		t.Errorf("Before of 2nd change = %q, want enroll", changes[1].Before.ProvisionState)
	}
}
