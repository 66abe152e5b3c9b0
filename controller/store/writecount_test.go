package store

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestWriteCounts follows one node through the node write path and checks
// each committed write is counted once, under its kind, and a write that
// fails is not.
func TestWriteCounts(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		c, ok := WriteCounterOf(s)
		if !ok {
			t.Fatal("the store counts no writes")
		}
		base := c.WriteCounts()
		want := maps.Clone(base)
		check := func(step string) {
			t.Helper()
			if got := c.WriteCounts(); !maps.Equal(got, want) {
				t.Errorf("after %s: counts %v, want %v", step, got, want)
			}
		}
		if err := s.RegisterConductor(ctx, Conductor{Hostname: "c1"}); err != nil {
			t.Fatal(err)
		}
		n := mustCreate(t, s, newNode("counted"))
		want["other"] += 2
		check("register, create")
		if _, err := s.Reserve(ctx, n.UUID, "c1"); err != nil {
			t.Fatal(err)
		}
		want["reserve"]++
		check("reserve")
		if _, err := s.Reserve(ctx, n.UUID, "c2"); err == nil {
			t.Fatal("a second conductor reserved a reserved node")
		}
		check("a refused reserve")
		for range 3 {
			if _, err := s.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.Maintenance = !n.Maintenance; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		want["update_node"] += 3
		check("three updates")
		if _, err := s.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { return ErrBadQuery }); err == nil {
			t.Fatal("UpdateNode ignored fn's error")
		}
		check("an update fn refused")
		if err := s.AddHistory(ctx, n.UUID, proto.HistoryEvent{Event: "x"}); err != nil {
			t.Fatal(err)
		}
		want["history"]++
		if err := s.PutInventory(ctx, n.UUID, json.RawMessage(`{"cpu":{}}`), nil); err != nil {
			t.Fatal(err)
		}
		want["inventory"]++
		check("history, inventory")
		if err := s.Release(ctx, n.UUID, "c1"); err != nil {
			t.Fatal(err)
		}
		want["release"]++
		if err := s.Release(ctx, n.UUID, "c1"); err == nil {
			t.Fatal("released a node twice")
		}
		check("release, a refused release")
	})
}
