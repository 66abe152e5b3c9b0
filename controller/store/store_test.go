package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/proto"
)

func ptr[T any](v T) *T { return &v }

func newNode(name string, mods ...func(*proto.Node)) *proto.Node {
	n := &proto.Node{
		UUID:           uuid.NewString(),
		Driver:         "redfish",
		DriverInfo:     proto.Dict{"redfish_address": "https://bmc", "redfish_username": "admin"},
		Properties:     proto.Dict{"cpu_arch": "x86_64"},
		Extra:          proto.Dict{},
		ProvisionState: proto.StateEnroll,
		PowerState:     ptr(proto.PowerOff),
		Traits:         []string{"CUSTOM_A"},
		BootInterface:  "ipxe",
	}
	if name != "" {
		n.Name = &name
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func mustCreate(t testing.TB, s Store, n *proto.Node) *proto.Node {
	t.Helper()
	if err := s.CreateNode(context.Background(), n); err != nil {
		t.Fatalf("CreateNode: %v", err)
	}
	return n
}

func nodeUUIDs(ns []*proto.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.UUID
	}
	return out
}

func TestNodeCRUD(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		s := openT(t, dsn, Options{Now: clock.Now})
		n := newNode("node-1", func(n *proto.Node) {
			n.Links = []proto.Link{{Href: "http://x/v1/nodes/1", Rel: "self"}}
			n.Reservation = nil
			n.InstanceInfo = proto.Dict{"image_source": "http://img", "nested": map[string]any{"a": []any{1.0, "b"}}}
		})
		mustCreate(t, s, n)
		if n.CreatedAt == nil || !n.CreatedAt.Equal(wireTime(clock.Now()).Time) {
			t.Fatalf("CreatedAt = %v, want %v", n.CreatedAt, wireTime(clock.Now()))
		}
		want := *n
		want.Links = nil // never stored
		for _, ident := range []string{n.UUID, "node-1"} {
			got, err := s.GetNode(ctx, ident)
			if err != nil {
				t.Fatalf("GetNode(%s): %v", ident, err)
			}
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("GetNode(%s) =\n%+v\nwant\n%+v", ident, got, &want)
			}
		}

		clock.Advance(time.Second)
		got, err := s.UpdateNode(ctx, "node-1", func(n *proto.Node) error {
			n.Name = ptr("node-one")
			n.Extra["k"] = "v"
			n.ProvisionState = proto.StateManageable
			return nil
		})
		if err != nil {
			t.Fatalf("UpdateNode: %v", err)
		}
		if got.UpdatedAt == nil || !got.UpdatedAt.Equal(wireTime(clock.Now()).Time) || got.Extra["k"] != "v" {
			t.Fatalf("UpdateNode returned %+v", got)
		}
		again, err := s.GetNode(ctx, "node-one")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("GetNode after update =\n%+v\nwant\n%+v", again, got)
		}
		if _, err := s.GetNode(ctx, "node-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetNode(old name) = %v, want ErrNotFound", err)
		}
		list, err := s.ListNodes(ctx, NodeQuery{ProvisionState: string(proto.StateManageable)})
		if err != nil || len(list) != 1 || list[0].UUID != n.UUID {
			t.Fatalf("ListNodes(manageable) = %v, %v: the indexed columns did not follow the update", nodeUUIDs(list), err)
		}

		if err := s.DeleteNode(ctx, n.UUID); err != nil {
			t.Fatalf("DeleteNode: %v", err)
		}
		if _, err := s.GetNode(ctx, n.UUID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetNode after delete: %v", err)
		}
		if err := s.DeleteNode(ctx, n.UUID); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), n.UUID) {
			t.Fatalf("DeleteNode twice: %v, want ErrNotFound naming the node", err)
		}
		if _, err := s.UpdateNode(ctx, "nope", func(*proto.Node) error { return nil }); !errors.Is(err, ErrNotFound) {
			t.Fatalf("UpdateNode(unknown): %v", err)
		}
	})
}

func TestNodeDuplicatesChangeNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		a := mustCreate(t, s, newNode("a"))
		b := mustCreate(t, s, newNode("b"))
		mustCreate(t, s, newNode("")) // several nodes without a name are fine
		mustCreate(t, s, newNode(""))

		dupName := newNode("a")
		if err := s.CreateNode(ctx, dupName); !errors.Is(err, ErrDuplicateName) {
			t.Errorf("duplicate name: %v, want ErrDuplicateName", err)
		}
		if dupName.CreatedAt != nil {
			t.Errorf("a failed CreateNode left CreatedAt set")
		}
		dupUUID := newNode("c", func(n *proto.Node) { n.UUID = a.UUID })
		if err := s.CreateNode(ctx, dupUUID); !errors.Is(err, ErrDuplicateUUID) {
			t.Errorf("duplicate uuid: %v, want ErrDuplicateUUID", err)
		}
		if err := s.CreateNode(ctx, newNode("x", func(n *proto.Node) { n.UUID = "" })); err == nil {
			t.Errorf("CreateNode without UUID succeeded")
		}

		before, err := s.GetNode(ctx, b.UUID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.UpdateNode(ctx, b.UUID, func(n *proto.Node) error {
			n.Name = ptr("a")
			n.Extra["touched"] = true
			return nil
		})
		if !errors.Is(err, ErrDuplicateName) {
			t.Errorf("rename to a taken name: %v, want ErrDuplicateName", err)
		}
		errMine := errors.New("refused by fn")
		_, err = s.UpdateNode(ctx, b.UUID, func(n *proto.Node) error {
			n.Extra["touched"] = true
			return errMine
		})
		if err != errMine {
			t.Errorf("UpdateNode returned %v, want fn's error as is", err)
		}
		_, err = s.UpdateNode(ctx, b.UUID, func(n *proto.Node) error { n.UUID = uuid.NewString(); return nil })
		if err == nil {
			t.Errorf("UpdateNode changing the UUID succeeded")
		}
		after, err := s.GetNode(ctx, b.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Errorf("failed updates changed the node:\n%+v\n%+v", before, after)
		}
		all, err := s.ListNodes(ctx, NodeQuery{})
		if err != nil || len(all) != 4 {
			t.Errorf("ListNodes = %d nodes, %v; want 4", len(all), err)
		}
	})
}

func TestPorts(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		n1 := mustCreate(t, s, newNode("n1"))
		n2 := mustCreate(t, s, newNode("n2"))
		p := &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:AB:CD:EF", NodeUUID: n1.UUID, PXEEnabled: true,
			Extra: proto.Dict{}, LocalLinkConnection: proto.Dict{"switch_id": "aa:bb:cc:dd:ee:ff", "port_id": "Eth1"},
			Links: []proto.Link{{Href: "x", Rel: "self"}}}
		if err := s.CreatePort(ctx, p); err != nil {
			t.Fatalf("CreatePort: %v", err)
		}
		if p.Address != "52:54:00:ab:cd:ef" || p.CreatedAt == nil {
			t.Fatalf("CreatePort left address %q, created_at %v", p.Address, p.CreatedAt)
		}
		want := *p
		want.Links = nil
		got, err := s.GetPort(ctx, p.UUID)
		if err != nil || !reflect.DeepEqual(got, &want) {
			t.Fatalf("GetPort = %+v, %v; want %+v", got, err, &want)
		}
		got, err = s.GetPortByAddress(ctx, "52:54:00:Ab:Cd:eF")
		if err != nil || got.UUID != p.UUID {
			t.Fatalf("GetPortByAddress = %v, %v", got, err)
		}

		if err := s.CreatePort(ctx, &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:ab:cd:ef", NodeUUID: n2.UUID}); !errors.Is(err, ErrDuplicateMAC) {
			t.Errorf("duplicate MAC (other case): %v, want ErrDuplicateMAC", err)
		}
		if err := s.CreatePort(ctx, &proto.Port{UUID: p.UUID, Address: "52:54:00:00:00:01", NodeUUID: n2.UUID}); !errors.Is(err, ErrDuplicateUUID) {
			t.Errorf("duplicate port UUID: %v, want ErrDuplicateUUID", err)
		}
		ghost := uuid.NewString()
		err = s.CreatePort(ctx, &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:00:00:02", NodeUUID: ghost})
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), ghost) {
			t.Errorf("port of unknown node: %v, want ErrNotFound naming %s", err, ghost)
		}

		p2 := &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:00:00:03", NodeUUID: n2.UUID}
		p3 := &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:00:00:04", NodeUUID: n1.UUID}
		for _, q := range []*proto.Port{p2, p3} {
			if err := s.CreatePort(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.ListPorts(ctx, PortQuery{})
		if err != nil || len(all) != 3 {
			t.Fatalf("ListPorts = %d, %v; want 3", len(all), err)
		}
		for _, tc := range []struct {
			q    PortQuery
			want []string
		}{
			{PortQuery{NodeUUID: n1.UUID}, []string{p.UUID, p3.UUID}},
			{PortQuery{NodeUUID: n1.UUID, SortDir: "desc"}, []string{p3.UUID, p.UUID}},
			{PortQuery{NodeUUID: n2.UUID}, []string{p2.UUID}},
			{PortQuery{NodeUUID: ghost}, nil},
			{PortQuery{Address: "52:54:00:00:00:03"}, []string{p2.UUID}},
			{PortQuery{SortKey: "address", Limit: 2}, []string{p2.UUID, p3.UUID}},
			{PortQuery{SortKey: "address", Marker: p3.UUID}, []string{p.UUID}},
		} {
			got, err := s.ListPorts(ctx, tc.q)
			if err != nil {
				t.Errorf("ListPorts(%+v): %v", tc.q, err)
				continue
			}
			var uuids []string
			for _, g := range got {
				uuids = append(uuids, g.UUID)
			}
			if !reflect.DeepEqual(uuids, tc.want) {
				t.Errorf("ListPorts(%+v) = %v, want %v", tc.q, uuids, tc.want)
			}
		}
		if _, err := s.ListPorts(ctx, PortQuery{SortKey: "node_id"}); !errors.Is(err, ErrBadSortKey) {
			t.Errorf("bad port sort key: %v", err)
		}

		// Update: new address (lower-cased), move to another node.
		up, err := s.UpdatePort(ctx, p.UUID, func(p *proto.Port) error {
			p.Address = "52:54:00:FF:FF:FF"
			p.NodeUUID = n2.UUID
			return nil
		})
		if err != nil || up.Address != "52:54:00:ff:ff:ff" || up.UpdatedAt == nil {
			t.Fatalf("UpdatePort = %+v, %v", up, err)
		}
		if got, err := s.ListPorts(ctx, PortQuery{NodeUUID: n2.UUID}); err != nil || len(got) != 2 {
			t.Errorf("after the move n2 has %d ports (%v), want 2", len(got), err)
		}
		if _, err := s.GetPortByAddress(ctx, "52:54:00:ab:cd:ef"); !errors.Is(err, ErrNotFound) {
			t.Errorf("old address still found: %v", err)
		}
		if _, err := s.UpdatePort(ctx, p.UUID, func(p *proto.Port) error { p.NodeUUID = ghost; return nil }); !errors.Is(err, ErrNotFound) {
			t.Errorf("move to unknown node: %v", err)
		}
		if _, err := s.UpdatePort(ctx, p.UUID, func(p *proto.Port) error { p.Address = p2.Address; return nil }); !errors.Is(err, ErrDuplicateMAC) {
			t.Errorf("update to taken MAC: %v", err)
		}
		if got, _ := s.GetPort(ctx, p.UUID); !reflect.DeepEqual(got, up) {
			t.Errorf("failed updates changed the port: %+v, want %+v", got, up)
		}
		if err := s.DeletePort(ctx, p.UUID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetPort(ctx, p.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetPort after delete: %v", err)
		}
		if err := s.DeletePort(ctx, p.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeletePort twice: %v", err)
		}
	})
}

func TestListNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		s := openT(t, dsn, Options{Now: clock.Now})
		states := []proto.ProvisionState{proto.StateEnroll, proto.StateAvailable, proto.StateActive}
		var nodes []*proto.Node
		for i := range 12 {
			clock.Advance(time.Duration(12-i) * time.Second) // created_at increases
			name := fmt.Sprintf("node-%02d", (i*7)%12)       // name order differs from insertion order
			if i%5 == 4 {
				name = "" // nameless nodes sort like ""
			}
			n := newNode(name, func(n *proto.Node) {
				n.ProvisionState = states[i%3]
				n.Maintenance = i%4 == 0
				n.ConductorGroup = []string{"", "rack1"}[i%2]
				if i%3 == 2 {
					n.InstanceUUID = ptr(uuid.NewString())
				}
				if i < 6 {
					n.Driver = "ipmi"
					n.ResourceClass = ptr("small")
				}
				if i == 7 {
					n.Owner = ptr("tenant-a")
					n.Fault = ptr("power failure")
				}
			})
			nodes = append(nodes, mustCreate(t, s, n))
		}
		pick := func(f func(i int, n *proto.Node) bool) []string {
			var out []string
			for i, n := range nodes {
				if f(i, n) {
					out = append(out, n.UUID)
				}
			}
			return out
		}
		for _, tc := range []struct {
			name string
			q    NodeQuery
			want []string
		}{
			{"all", NodeQuery{}, pick(func(int, *proto.Node) bool { return true })},
			{"state", NodeQuery{ProvisionState: "available"}, pick(func(i int, _ *proto.Node) bool { return i%3 == 1 })},
			{"driver", NodeQuery{Driver: "ipmi"}, pick(func(i int, _ *proto.Node) bool { return i < 6 })},
			{"group", NodeQuery{ConductorGroup: "rack1"}, pick(func(i int, _ *proto.Node) bool { return i%2 == 1 })},
			{"resource class", NodeQuery{ResourceClass: "small"}, pick(func(i int, _ *proto.Node) bool { return i < 6 })},
			{"owner", NodeQuery{Owner: "tenant-a"}, pick(func(i int, _ *proto.Node) bool { return i == 7 })},
			{"fault", NodeQuery{Fault: "power failure"}, pick(func(i int, _ *proto.Node) bool { return i == 7 })},
			{"instance", NodeQuery{InstanceUUID: *nodes[2].InstanceUUID}, []string{nodes[2].UUID}},
			{"maintenance", NodeQuery{Maintenance: ptr(true)}, pick(func(i int, _ *proto.Node) bool { return i%4 == 0 })},
			{"not maintenance", NodeQuery{Maintenance: ptr(false)}, pick(func(i int, _ *proto.Node) bool { return i%4 != 0 })},
			{"associated", NodeQuery{Associated: ptr(true)}, pick(func(i int, _ *proto.Node) bool { return i%3 == 2 })},
			{"unassociated", NodeQuery{Associated: ptr(false)}, pick(func(i int, _ *proto.Node) bool { return i%3 != 2 })},
			{"combined", NodeQuery{Driver: "ipmi", Maintenance: ptr(false), ProvisionState: "active"}, pick(func(i int, _ *proto.Node) bool {
				return i < 6 && i%4 != 0 && i%3 == 2
			})},
			{"limit", NodeQuery{Limit: 3}, nodeUUIDs(nodes[:3])},
			{"marker", NodeQuery{Marker: nodes[9].UUID}, nodeUUIDs(nodes[10:])},
			{"desc", NodeQuery{SortDir: "desc", Limit: 2}, []string{nodes[11].UUID, nodes[10].UUID}},
			{"none", NodeQuery{Driver: "nope"}, nil},
		} {
			got, err := s.ListNodes(ctx, tc.q)
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			if g := nodeUUIDs(got); !(len(g) == 0 && len(tc.want) == 0) && !reflect.DeepEqual(g, tc.want) {
				t.Errorf("%s: got %v, want %v", tc.name, g, tc.want)
			}
		}

		// Every sort key, both directions: the full list is ordered by the key
		// then insertion, and paging with a marker yields exactly it.
		insertion := map[string]int{}
		for i, n := range nodes {
			insertion[n.UUID] = i
		}
		keyOf := func(n *proto.Node, key string) string {
			b, _ := json.Marshal(n)
			var m map[string]any
			json.Unmarshal(b, &m)
			switch v := m[key].(type) {
			case nil:
				return ""
			case bool:
				if v {
					return "1"
				}
				return "0"
			case string:
				if key == "created_at" || key == "updated_at" {
					return fmt.Sprint(micros(func() *proto.Time { var t proto.Time; t.UnmarshalJSON([]byte(`"` + v + `"`)); return &t }()))
				}
				return v
			}
			return fmt.Sprint(m[key])
		}
		for _, key := range NodeSortKeys {
			for _, dir := range []string{"asc", "desc"} {
				full, err := s.ListNodes(ctx, NodeQuery{SortKey: key, SortDir: dir})
				if err != nil {
					t.Fatalf("sort %s %s: %v", key, dir, err)
				}
				want := append([]*proto.Node(nil), full...)
				sort.SliceStable(want, func(i, j int) bool {
					a, b := want[i], want[j]
					ka, kb := keyOf(a, key), keyOf(b, key)
					if key == "id" {
						ka, kb = fmt.Sprintf("%03d", insertion[a.UUID]), fmt.Sprintf("%03d", insertion[b.UUID])
					}
					if ka != kb {
						return (ka < kb) == (dir == "asc")
					}
					return (insertion[a.UUID] < insertion[b.UUID]) == (dir == "asc")
				})
				if !reflect.DeepEqual(nodeUUIDs(full), nodeUUIDs(want)) {
					t.Errorf("sort %s %s: order %v, want %v", key, dir, nodeUUIDs(full), nodeUUIDs(want))
				}
				var paged []*proto.Node
				marker := ""
				for range 10 {
					page, err := s.ListNodes(ctx, NodeQuery{SortKey: key, SortDir: dir, Limit: 5, Marker: marker})
					if err != nil {
						t.Fatalf("page %s %s: %v", key, dir, err)
					}
					paged = append(paged, page...)
					if len(page) < 5 {
						break
					}
					marker = page[len(page)-1].UUID
				}
				if !reflect.DeepEqual(nodeUUIDs(paged), nodeUUIDs(full)) {
					t.Errorf("paging %s %s: %v, want %v", key, dir, nodeUUIDs(paged), nodeUUIDs(full))
				}
			}
		}

		for _, tc := range []struct {
			q    NodeQuery
			want error
		}{
			{NodeQuery{SortKey: "driver_info"}, ErrBadSortKey},
			{NodeQuery{SortKey: "id; DROP TABLE nodes"}, ErrBadSortKey},
			{NodeQuery{SortDir: "sideways"}, ErrBadQuery},
			{NodeQuery{Limit: -1}, ErrBadQuery},
			{NodeQuery{Marker: uuid.NewString()}, ErrNotFound},
		} {
			if _, err := s.ListNodes(ctx, tc.q); !errors.Is(err, tc.want) {
				t.Errorf("ListNodes(%+v) = %v, want %v", tc.q, err, tc.want)
			}
		}
	})
}

func TestUpdateNodeConcurrent(t *testing.T) {
	const workers, each = 8, 10
	run := func(t *testing.T, stores []Store, uuid string) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := range workers {
			wg.Go(func() {
				s := stores[w%len(stores)]
				for range each {
					_, err := s.UpdateNode(ctx, uuid, func(n *proto.Node) error {
						c, _ := n.Extra["counter"].(float64)
						n.Extra["counter"] = c + 1
						return nil
					})
					if err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("UpdateNode: %v", err)
		}
		n, err := stores[0].GetNode(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Extra["counter"]; got != float64(workers*each) {
			t.Fatalf("counter = %v, want %d: updates were lost", got, workers*each)
		}
	}
	eachBackend(t, func(t *testing.T, dsn string) {
		s := openT(t, dsn, Options{})
		n := mustCreate(t, s, newNode("c"))
		t.Run("one store", func(t *testing.T) { run(t, []Store{s}, n.UUID) })
		// Two stores on one database stand for two controller processes
		// (for SQLite: two writers contending for the file lock).
		m := mustCreate(t, s, newNode("d"))
		s2 := openT(t, dsn, Options{})
		t.Run("two stores", func(t *testing.T) { run(t, []Store{s, s2}, m.UUID) })
	})
}

func TestReservations(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		s := openT(t, dsn, Options{Now: clock.Now, DeadAfter: 30 * time.Second})
		for _, h := range []string{"a", "b"} {
			if err := s.RegisterConductor(ctx, Conductor{Hostname: h}); err != nil {
				t.Fatal(err)
			}
		}
		n := mustCreate(t, s, newNode("r"))

		got, err := s.Reserve(ctx, "r", "a")
		if err != nil || got.Reservation == nil || *got.Reservation != "a" || got.UUID != n.UUID {
			t.Fatalf("Reserve by name = %+v, %v", got, err)
		}
		if g, _ := s.GetNode(ctx, n.UUID); g.Reservation == nil || *g.Reservation != "a" {
			t.Fatalf("GetNode after Reserve: reservation %v", g.Reservation)
		}
		wantLocked := func(err error, holder string) {
			t.Helper()
			var le *LockedError
			if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.Holder != holder {
				t.Fatalf("got %v, want LockedError held by %s", err, holder)
			}
		}
		_, err = s.Reserve(ctx, n.UUID, "b")
		wantLocked(err, "a")
		_, err = s.Reserve(ctx, n.UUID, "a") // not re-entrant
		wantLocked(err, "a")
		wantLocked(s.Release(ctx, n.UUID, "b"), "a")
		if _, err := s.Reserve(ctx, "ghost", "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Reserve(unknown) = %v", err)
		}
		if err := s.Release(ctx, uuid.NewString(), "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Release(unknown) = %v", err)
		}

		// UpdateNode leaves the reservation alone.
		if u, err := s.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.Extra["x"] = "y"; return nil }); err != nil ||
			u.Reservation == nil || *u.Reservation != "a" {
			t.Fatalf("UpdateNode under reservation: %+v, %v", u, err)
		}

		if err := s.Release(ctx, n.UUID, "a"); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := s.Release(ctx, n.UUID, "a"); !errors.Is(err, ErrNotReserved) {
			t.Fatalf("Release of a free node = %v, want ErrNotReserved", err)
		}
		if g, _ := s.GetNode(ctx, n.UUID); g.Reservation != nil {
			t.Fatalf("reservation after Release: %v", *g.Reservation)
		}

		// a dies (b keeps heartbeating): b takes the node over.
		if _, err := s.Reserve(ctx, n.UUID, "a"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(29 * time.Second)
		if err := s.HeartbeatConductor(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		_, err = s.Reserve(ctx, n.UUID, "b")
		wantLocked(err, "a") // a's last heartbeat is 29 s old: still alive
		clock.Advance(2 * time.Second)
		if got, err := s.Reserve(ctx, n.UUID, "b"); err != nil || *got.Reservation != "b" {
			t.Fatalf("steal from dead conductor: %+v, %v", got, err)
		}
		if err := s.Release(ctx, n.UUID, "a"); !errors.Is(err, ErrLocked) {
			t.Fatalf("the dead holder released the stolen node: %v", err)
		}

		// An unregistered conductor is dead at once; an unknown one too.
		if err := s.RegisterConductor(ctx, Conductor{Hostname: "a"}); err != nil {
			t.Fatal(err)
		}
		m := mustCreate(t, s, newNode("m"))
		if _, err := s.Reserve(ctx, m.UUID, "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.UnregisterConductor(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Reserve(ctx, m.UUID, "a"); err != nil || *got.Reservation != "a" {
			t.Fatalf("steal from unregistered conductor: %+v, %v", got, err)
		}
		o := mustCreate(t, s, newNode("o"))
		if _, err := s.Reserve(ctx, o.UUID, "never-registered"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reserve(ctx, o.UUID, "a"); err != nil {
			t.Fatalf("steal from a conductor that never registered: %v", err)
		}
	})
}

func TestReserveRace(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		s2 := openT(t, dsn, Options{})
		n := mustCreate(t, s, newNode("race"))
		const contenders = 8
		for i := range contenders {
			if err := s.RegisterConductor(ctx, Conductor{Hostname: fmt.Sprint("c", i)}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		results := make([]error, contenders)
		for i := range contenders {
			wg.Go(func() {
				st := []Store{s, s2}[i%2]
				_, results[i] = st.Reserve(ctx, n.UUID, fmt.Sprint("c", i))
			})
		}
		wg.Wait()
		winners := 0
		for i, err := range results {
			switch {
			case err == nil:
				winners++
			case !errors.Is(err, ErrLocked):
				t.Errorf("contender %d: %v", i, err)
			}
		}
		if winners != 1 {
			t.Fatalf("%d conductors hold the reservation, want exactly 1", winners)
		}
	})
}

func TestReleaseDead(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		s := openT(t, dsn, Options{Now: clock.Now, DeadAfter: 10 * time.Second})
		for _, h := range []string{"live", "dying", "leaving"} {
			if err := s.RegisterConductor(ctx, Conductor{Hostname: h}); err != nil {
				t.Fatal(err)
			}
		}
		holders := []string{"live", "dying", "leaving", "unknown", ""}
		var nodes []*proto.Node
		for i, h := range holders {
			n := mustCreate(t, s, newNode(fmt.Sprint("n", i)))
			nodes = append(nodes, n)
			if h != "" {
				if _, err := s.Reserve(ctx, n.UUID, h); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.UnregisterConductor(ctx, "leaving"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(11 * time.Second)
		if err := s.HeartbeatConductor(ctx, "live"); err != nil {
			t.Fatal(err)
		}
		got, err := s.ReleaseDead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		want := []string{nodes[1].UUID, nodes[2].UUID, nodes[3].UUID}
		sort.Strings(want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ReleaseDead = %v, want %v", got, want)
		}
		for i, n := range nodes {
			g, err := s.GetNode(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if (g.Reservation != nil) != (i == 0) {
				t.Errorf("node held by %q: reservation %v after ReleaseDead", holders[i], g.Reservation)
			}
		}
		if got, err := s.ReleaseDead(ctx); err != nil || len(got) != 0 {
			t.Fatalf("second ReleaseDead = %v, %v; want nothing", got, err)
		}
	})
}

func TestHistoryAndInventory(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		s := openT(t, dsn, Options{Now: clock.Now})
		n := mustCreate(t, s, newNode("h"))
		other := mustCreate(t, s, newNode("other"))

		if got, err := s.ListHistory(ctx, n.UUID); err != nil || len(got) != 0 {
			t.Fatalf("empty history = %v, %v", got, err)
		}
		fixed := proto.HistoryEvent{UUID: uuid.NewString(), CreatedAt: wireTime(clock.Now().Add(-time.Hour)),
			Severity: "ERROR", Event: "deploy failed", EventType: "deploy", Conductor: "c1", User: "admin"}
		if err := s.AddHistory(ctx, n.UUID, fixed); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		if err := s.AddHistory(ctx, n.UUID, proto.HistoryEvent{Severity: "INFO", Event: "second",
			Links: []proto.Link{{Href: "x", Rel: "self"}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddHistory(ctx, other.UUID, proto.HistoryEvent{Severity: "INFO", Event: "elsewhere"}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddHistory(ctx, uuid.NewString(), proto.HistoryEvent{Event: "x"}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("AddHistory(unknown node) = %v", err)
		}
		if err := s.AddHistory(ctx, n.UUID, fixed); !errors.Is(err, ErrDuplicateUUID) {
			t.Fatalf("AddHistory(same UUID twice) = %v", err)
		}
		got, err := s.ListHistory(ctx, n.UUID)
		if err != nil || len(got) != 2 {
			t.Fatalf("ListHistory = %v, %v", got, err)
		}
		// The store records the node's provision state with the event.
		fixed.State = string(n.ProvisionState)
		if !reflect.DeepEqual(got[0], fixed) {
			t.Errorf("first event = %+v, want %+v", got[0], fixed)
		}
		if got[1].Event != "second" || got[1].UUID == "" || got[1].CreatedAt == nil ||
			!got[1].CreatedAt.Equal(wireTime(clock.Now()).Time) || got[1].Links != nil {
			t.Errorf("second event = %+v", got[1])
		}
		if _, err := s.ListHistory(ctx, uuid.NewString()); !errors.Is(err, ErrNotFound) {
			t.Errorf("ListHistory(unknown node) = %v", err)
		}

		if _, _, err := s.GetInventory(ctx, n.UUID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetInventory before any = %v", err)
		}
		inv := json.RawMessage(`{"cpu":{"count":4,"architecture":"x86_64"},"disks":[{"name":"/dev/vda","size":1073741824}]}`)
		plugin := json.RawMessage(`{"all_interfaces":{"eth0":{"pxe_enabled":true}}}`)
		if err := s.PutInventory(ctx, n.UUID, inv, plugin); err != nil {
			t.Fatal(err)
		}
		gi, gp, err := s.GetInventory(ctx, n.UUID)
		if err != nil || string(gi) != string(inv) || string(gp) != string(plugin) {
			t.Fatalf("GetInventory = %s, %s, %v", gi, gp, err)
		}
		inv2 := json.RawMessage(`{"cpu":{"count":8}}`)
		if err := s.PutInventory(ctx, n.UUID, inv2, nil); err != nil {
			t.Fatal(err)
		}
		gi, gp, err = s.GetInventory(ctx, n.UUID)
		if err != nil || string(gi) != string(inv2) || gp != nil {
			t.Fatalf("GetInventory after replace = %s, %s, %v", gi, gp, err)
		}
		if err := s.PutInventory(ctx, uuid.NewString(), inv, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("PutInventory(unknown node) = %v", err)
		}
		if _, _, err := s.GetInventory(ctx, other.UUID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetInventory(other node) = %v", err)
		}
	})
}

func TestConductors(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		s := openT(t, dsn, Options{Now: clock.Now, DeadAfter: 30 * time.Second})
		t0 := clock.Now().UTC().Truncate(time.Microsecond)
		if err := s.RegisterConductor(ctx, Conductor{Hostname: "b", Group: "rack1", Drivers: []string{"redfish", "ipmi"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterConductor(ctx, Conductor{Hostname: "a"}); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterConductor(ctx, Conductor{}); err == nil {
			t.Fatal("RegisterConductor without hostname succeeded")
		}
		got, err := s.ListConductors(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		want := []Conductor{
			{Hostname: "a", Drivers: []string{}, CreatedAt: t0, UpdatedAt: t0, Alive: true},
			{Hostname: "b", Group: "rack1", Drivers: []string{"redfish", "ipmi"}, CreatedAt: t0, UpdatedAt: t0, Alive: true},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ListConductors =\n%+v\nwant\n%+v", got, want)
		}

		clock.Advance(20 * time.Second)
		if err := s.HeartbeatConductor(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.HeartbeatConductor(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("HeartbeatConductor(unknown) = %v", err)
		}
		clock.Advance(15 * time.Second) // b: 35 s since its heartbeat
		alive, err := s.ListConductors(ctx, true)
		if err != nil || len(alive) != 1 || alive[0].Hostname != "a" || !alive[0].UpdatedAt.Equal(t0.Add(20*time.Second)) {
			t.Fatalf("alive conductors = %+v, %v; want only a", alive, err)
		}
		all, _ := s.ListConductors(ctx, false)
		if len(all) != 2 || all[1].Alive {
			t.Fatalf("all conductors = %+v; want b listed, not alive", all)
		}

		// Re-registering b revives it, keeps CreatedAt, takes the new group.
		if err := s.RegisterConductor(ctx, Conductor{Hostname: "b", Group: "rack2"}); err != nil {
			t.Fatal(err)
		}
		all, _ = s.ListConductors(ctx, false)
		if b := all[1]; !b.Alive || b.Group != "rack2" || !b.CreatedAt.Equal(t0) || len(b.Drivers) != 0 {
			t.Fatalf("re-registered b = %+v", b)
		}

		if err := s.UnregisterConductor(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.HeartbeatConductor(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		alive, _ = s.ListConductors(ctx, true)
		if len(alive) != 1 || alive[0].Hostname != "b" {
			t.Fatalf("after unregistering a (and a late heartbeat), alive = %+v; want only b", alive)
		}
		if err := s.UnregisterConductor(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("UnregisterConductor(unknown) = %v", err)
		}
	})
}

func TestDeleteNodeCascades(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		n := mustCreate(t, s, newNode("doomed"))
		keep := mustCreate(t, s, newNode("kept"))
		port := &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:12:34:56", NodeUUID: n.UUID}
		kept := &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:12:34:57", NodeUUID: keep.UUID}
		for _, p := range []*proto.Port{port, kept} {
			if err := s.CreatePort(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		for _, u := range []string{n.UUID, keep.UUID} {
			if err := s.AddHistory(ctx, u, proto.HistoryEvent{Severity: "INFO", Event: "e"}); err != nil {
				t.Fatal(err)
			}
			if err := s.PutInventory(ctx, u, json.RawMessage(`{}`), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeleteNode(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetPort(ctx, port.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("port of deleted node: %v", err)
		}
		if _, err := s.GetPortByAddress(ctx, port.Address); !errors.Is(err, ErrNotFound) {
			t.Errorf("port of deleted node by address: %v", err)
		}
		if _, err := s.ListHistory(ctx, n.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("history of deleted node: %v", err)
		}
		if _, _, err := s.GetInventory(ctx, n.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("inventory of deleted node: %v", err)
		}
		// The other node's things are untouched, the MAC is free again.
		if ps, err := s.ListPorts(ctx, PortQuery{}); err != nil || len(ps) != 1 || ps[0].UUID != kept.UUID {
			t.Errorf("ports left = %v, %v", ps, err)
		}
		if h, err := s.ListHistory(ctx, keep.UUID); err != nil || len(h) != 1 {
			t.Errorf("history of kept node = %v, %v", h, err)
		}
		if _, _, err := s.GetInventory(ctx, keep.UUID); err != nil {
			t.Errorf("inventory of kept node: %v", err)
		}
		if err := s.CreatePort(ctx, &proto.Port{UUID: uuid.NewString(), Address: port.Address, NodeUUID: keep.UUID}); err != nil {
			t.Errorf("reuse of the deleted port's MAC: %v", err)
		}
	})
}

// snapshot reads back everything a store holds.
type snapshot struct {
	Nodes      []*proto.Node
	Ports      []*proto.Port
	History    map[string][]proto.HistoryEvent
	Inventory  map[string][2]string
	Conductors []Conductor
}

func takeSnapshot(t *testing.T, s Store) snapshot {
	t.Helper()
	ctx := context.Background()
	var snap snapshot
	var err error
	if snap.Nodes, err = s.ListNodes(ctx, NodeQuery{}); err != nil {
		t.Fatal(err)
	}
	if snap.Ports, err = s.ListPorts(ctx, PortQuery{}); err != nil {
		t.Fatal(err)
	}
	snap.History = map[string][]proto.HistoryEvent{}
	snap.Inventory = map[string][2]string{}
	for _, n := range snap.Nodes {
		if snap.History[n.UUID], err = s.ListHistory(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		inv, plugin, err := s.GetInventory(ctx, n.UUID)
		if err == nil {
			snap.Inventory[n.UUID] = [2]string{string(inv), string(plugin)}
		} else if !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	if snap.Conductors, err = s.ListConductors(ctx, false); err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestReopen(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		opts := Options{Now: clock.Now}
		s, err := Open(ctx, dsn, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterConductor(ctx, Conductor{Hostname: "c1", Group: "g", Drivers: []string{"fake"}}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			clock.Advance(time.Second)
			n := mustCreate(t, s, newNode(fmt.Sprint("n", i), func(n *proto.Node) {
				n.Extra = proto.Dict{"i": float64(i), "nested": map[string]any{"list": []any{"a", true, nil}}}
				n.ProvisionUpdatedAt = wireTime(clock.Now())
			}))
			if err := s.CreatePort(ctx, &proto.Port{UUID: uuid.NewString(), Address: fmt.Sprintf("52:54:00:00:00:%02x", i), NodeUUID: n.UUID}); err != nil {
				t.Fatal(err)
			}
			if err := s.AddHistory(ctx, n.UUID, proto.HistoryEvent{Severity: "INFO", Event: fmt.Sprint("event ", i)}); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				if err := s.PutInventory(ctx, n.UUID, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), json.RawMessage(`{"p":1}`)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := s.Reserve(ctx, "n1", "c1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateNode(ctx, "n2", func(n *proto.Node) error { n.Maintenance = true; return nil }); err != nil {
			t.Fatal(err)
		}
		before := takeSnapshot(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		for i := range 2 { // twice: migrations must be idempotent
			s2 := openT(t, dsn, opts)
			after := takeSnapshot(t, s2)
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("reopen %d: contents differ:\n%+v\n%+v", i, before, after)
			}
			var count, max int
			ss := s2.(*sqlStore)
			if err := ss.rdb.QueryRowContext(ctx, "SELECT COUNT(*), MAX(version) FROM schema_migrations").Scan(&count, &max); err != nil {
				t.Fatal(err)
			}
			ms, _ := loadMigrations(ss.d.migrations)
			if count != len(ms) || max != ms[len(ms)-1].version {
				t.Fatalf("schema_migrations has %d rows up to %d, want %d up to %d", count, max, len(ms), ms[len(ms)-1].version)
			}
			s2.Close()
		}

		// A database migrated by a newer Kiln is refused.
		s3 := openT(t, dsn, opts)
		ss := s3.(*sqlStore)
		if _, err := ss.wdb.ExecContext(ctx, ss.d.rebind("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),
			9999, "9999_future.sql", 0); err != nil {
			t.Fatal(err)
		}
		s3.Close()
		if s4, err := Open(ctx, dsn, opts); err == nil || !strings.Contains(err.Error(), "9999") {
			if s4 != nil {
				s4.Close()
			}
			t.Fatalf("Open of a database from the future = %v, want an error naming version 9999", err)
		}
	})
}

// TestListSummaryMatchesDocuments: the column-only list view agrees with the
// documents on every field it fills, for every node shape.
func TestListSummaryMatchesDocuments(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		s := openT(t, dsn, Options{})
		ctx := context.Background()
		mustCreate(t, s, newNode("plain"))
		mustCreate(t, s, newNode("", func(n *proto.Node) { n.PowerState = nil }))
		mustCreate(t, s, newNode("busy", func(n *proto.Node) {
			n.InstanceUUID = ptr(uuid.NewString())
			n.Maintenance = true
			n.ProvisionState = proto.StateDeployWait
			n.PowerState = ptr(proto.PowerOn)
		}))
		if err := s.RegisterConductor(ctx, Conductor{Hostname: "c1"}); err != nil {
			t.Fatal(err)
		}
		full, err := s.ListNodes(ctx, NodeQuery{SortKey: "name"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reserve(ctx, full[0].UUID, "c1"); err != nil {
			t.Fatal(err)
		}
		full, _ = s.ListNodes(ctx, NodeQuery{SortKey: "name"})
		sum, err := s.ListNodes(ctx, NodeQuery{SortKey: "name", Summary: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(sum) != len(full) {
			t.Fatalf("%d summaries, %d nodes", len(sum), len(full))
		}
		for i := range full {
			f, m := full[i], sum[i]
			got := proto.Node{UUID: m.UUID, Name: m.Name, InstanceUUID: m.InstanceUUID, PowerState: m.PowerState,
				ProvisionState: m.ProvisionState, Maintenance: m.Maintenance, Reservation: m.Reservation}
			want := proto.Node{UUID: f.UUID, Name: f.Name, InstanceUUID: f.InstanceUUID, PowerState: f.PowerState,
				ProvisionState: f.ProvisionState, Maintenance: f.Maintenance, Reservation: f.Reservation}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("summary %+v, document %+v", got, want)
			}
		}
	})
}
