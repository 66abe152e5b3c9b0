package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

func chassisT(t *testing.T, st Store) *Resources[proto.Chassis] {
	t.Helper()
	rs, err := NewResources(st, ChassisResource)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func strp(s string) *string { return &s }

// TestResourcesLifecycle drives the generic create/get/update/delete of a
// described resource (chassis) on each backend, and the nodes' reference to
// it: a node may only name an existing chassis and a chassis with nodes
// cannot be deleted.
func TestResourcesLifecycle(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		st := openT(t, dsn, Options{Now: clock.Now})
		rs := chassisT(t, st)
		c := &proto.Chassis{UUID: "aaaaaaaa-0000-4000-8000-000000000001", Description: strp("rack 1"), Extra: proto.Dict{"a": "b"},
			Links: []proto.Link{{Href: "x", Rel: "self"}}}
		if err := rs.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		if c.CreatedAt == nil || !c.CreatedAt.Equal(clock.Now().Truncate(time.Microsecond)) {
			t.Errorf("CreatedAt = %v, want the clock's %v", c.CreatedAt, clock.Now())
		}
		if err := rs.Create(ctx, &proto.Chassis{UUID: c.UUID}); !errors.Is(err, ErrDuplicateUUID) {
			t.Errorf("second create with the same UUID: %v, want ErrDuplicateUUID", err)
		}
		got, err := rs.Get(ctx, c.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Links != nil || *got.Description != "rack 1" || got.Extra["a"] != "b" || !got.CreatedAt.Equal(c.CreatedAt.Time) {
			t.Errorf("Get = %+v, want the chassis as created without links", got)
		}
		if _, err := rs.Get(ctx, "aaaaaaaa-0000-4000-8000-00000000dead"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get of an unknown UUID: %v, want ErrNotFound", err)
		}

		clock.Advance(time.Second)
		up, err := rs.Update(ctx, c.UUID, func(v *proto.Chassis) error {
			v.Description = strp("rack 2")
			v.UUID, v.CreatedAt = "changed", nil // ignored: identity and creation stay
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if up.UUID != c.UUID || !up.CreatedAt.Equal(c.CreatedAt.Time) || up.UpdatedAt == nil || *up.Description != "rack 2" {
			t.Errorf("Update = %+v", up)
		}
		refused := errors.New("refused")
		if _, err := rs.Update(ctx, c.UUID, func(v *proto.Chassis) error { v.Description = nil; return refused }); err != refused {
			t.Errorf("Update whose fn fails: %v, want fn's error as is", err)
		}
		if got, _ := rs.Get(ctx, c.UUID); got.Description == nil || *got.Description != "rack 2" {
			t.Errorf("a failed update changed the chassis: %+v", got)
		}

		n := &proto.Node{UUID: "bbbbbbbb-0000-4000-8000-000000000001", Driver: "fake-hardware", ChassisUUID: strp("aaaaaaaa-0000-4000-8000-00000000dead")}
		if err := st.CreateNode(ctx, n); !errors.Is(err, ErrMissingReference) {
			t.Fatalf("a node naming no existing chassis: %v, want ErrMissingReference", err)
		}
		n.ChassisUUID = &c.UUID
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.ChassisUUID = strp("aaaaaaaa-0000-4000-8000-00000000dead"); return nil }); !errors.Is(err, ErrMissingReference) {
			t.Errorf("a node moved to no existing chassis: %v, want ErrMissingReference", err)
		}
		if err := rs.Delete(ctx, c.UUID); !errors.Is(err, ErrInUse) {
			t.Errorf("delete of a chassis with a node: %v, want ErrInUse", err)
		}
		nodes, err := st.ListNodes(ctx, NodeQuery{ChassisUUID: c.UUID})
		if err != nil || len(nodes) != 1 || nodes[0].UUID != n.UUID {
			t.Errorf("nodes of the chassis: %v, %v", nodes, err)
		}
		if _, err := st.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.ChassisUUID = strp(""); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := rs.Delete(ctx, c.UUID); err != nil {
			t.Errorf("delete of an empty chassis: %v", err)
		}
		if err := rs.Delete(ctx, c.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("second delete: %v, want ErrNotFound", err)
		}
	})
}

// TestResourcesList pages through every sort key in both directions and
// checks each page against the order computed here.
func TestResourcesList(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		st := openT(t, dsn, Options{Now: clock.Now})
		rs := chassisT(t, st)
		var all []*proto.Chassis
		for i := range 7 {
			c := &proto.Chassis{UUID: fmt.Sprintf("cccccccc-0000-4000-8000-%012d", (i*5)%7)}
			if i%3 != 0 {
				c.Description = strp(fmt.Sprintf("d%d", (i*3)%4))
			}
			clock.Advance(time.Second)
			if err := rs.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			all = append(all, c)
		}
		key := map[string]func(c *proto.Chassis) string{
			"id":          nil,
			"uuid":        func(c *proto.Chassis) string { return c.UUID },
			"description": func(c *proto.Chassis) string { return deref(c.Description) },
			"created_at":  func(c *proto.Chassis) string { return c.CreatedAt.Format(time.RFC3339Nano) },
			"updated_at":  func(c *proto.Chassis) string { return "" },
		}
		if got := rs.SortKeys(); !slices.Equal(got, []string{"created_at", "description", "id", "updated_at", "uuid"}) {
			t.Errorf("SortKeys = %v", got)
		}
		for name, f := range key {
			for _, dir := range []string{"asc", "desc"} {
				want := slices.Clone(all) // insertion order = id order
				if f != nil {
					slices.SortStableFunc(want, func(a, b *proto.Chassis) int {
						if f(a) < f(b) {
							return -1
						} else if f(a) > f(b) {
							return 1
						}
						return 0
					})
				}
				if dir == "desc" {
					slices.Reverse(want)
				}
				var got []string
				marker := ""
				for range 10 {
					page, err := rs.List(ctx, Query{Limit: 3, Marker: marker, SortKey: name, SortDir: dir})
					if err != nil {
						t.Fatal(err)
					}
					for _, c := range page {
						got = append(got, c.UUID)
					}
					if len(page) < 3 {
						break
					}
					marker = page[len(page)-1].UUID
				}
				var wantIDs []string
				for _, c := range want {
					wantIDs = append(wantIDs, c.UUID)
				}
				if !slices.Equal(got, wantIDs) {
					t.Errorf("sort %s %s: got %v, want %v", name, dir, got, wantIDs)
				}
			}
		}
		for _, q := range []Query{{SortKey: "extra"}, {SortDir: "up"}, {Limit: -1}, {Filters: map[string]string{"nope": "x"}}} {
			if _, err := rs.List(ctx, q); !errors.Is(err, ErrBadSortKey) && !errors.Is(err, ErrBadQuery) {
				t.Errorf("List(%+v): %v, want a bad query error", q, err)
			}
		}
		if _, err := rs.List(ctx, Query{Marker: "cccccccc-0000-4000-8000-00000000dead"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown marker: %v, want ErrNotFound", err)
		}
	})
}

// wrapper is a Store wrapping another, as events.Watch's is.
type wrapper struct{ Store }

func (w wrapper) Unwrap() Store { return w.Store }

// TestResourcesStores: the generic code needs the SQL store, found through
// wrappers, and refuses anything else.
func TestResourcesStores(t *testing.T) {
	if _, err := NewResources[proto.Chassis](nil, ChassisResource); err == nil {
		t.Error("NewResources on a nil store succeeded")
	}
	if _, err := NewResources[proto.Chassis](wrapper{wrapper{nil}}, ChassisResource); err == nil {
		t.Error("NewResources on a wrapped nil store succeeded")
	}
	st := openT(t, "sqlite://"+t.TempDir()+"/k.db", Options{})
	rs, err := NewResources(wrapper{wrapper{st}}, ChassisResource)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Create(context.Background(), &proto.Chassis{UUID: "aaaaaaaa-0000-4000-8000-000000000009"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Get(context.Background(), "aaaaaaaa-0000-4000-8000-000000000009"); err != nil {
		t.Errorf("through two wrappers: %v", err)
	}
}
