package api_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// pagedRow is one enrolled node or port with the values its sort keys order
// by, as the store's SQL expressions compute them, so that the test can say
// in which order a walk must return the rows.
type pagedRow struct {
	uuid string
	id   int // insertion order: the tie-breaker
	keys map[string]any
}

// enrollForPaging writes n nodes and n ports straight into a fresh SQLite file
// (fast), with values that make every sort key order the rows differently
// from insertion order. The nodes belong to conductor groups no controller in
// the test serves, so nothing changes them while they are listed.
func enrollForPaging(t *testing.T, db string, n int) (nodeRows, portRows []pagedRow, portNode string) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var now time.Time
	s, err := store.Open(ctx, db, store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	micros := func(t *proto.Time) int64 {
		if t == nil {
			return 0
		}
		return t.UnixMicro()
	}
	states := []proto.ProvisionState{proto.StateEnroll, proto.StateManageable, proto.StateAvailable, proto.StateActive}
	powers := []proto.PowerState{proto.PowerOn, proto.PowerOff}
	for i := range n {
		now = base.Add(time.Duration(rng.IntN(1_000_000)) * time.Second)
		node := &proto.Node{
			UUID:           uuid.NewString(),
			Driver:         []string{"fake-hardware", "redfish", "ipmi"}[rng.IntN(3)],
			ProvisionState: states[rng.IntN(len(states))],
			PowerState:     &powers[rng.IntN(2)],
			Maintenance:    rng.IntN(2) == 0,
			ConductorGroup: fmt.Sprintf("paging-%d", rng.IntN(5)),
		}
		if rng.IntN(3) > 0 {
			name := fmt.Sprintf("node-%06d", rng.IntN(10*n+10)) + "-" + strconv.Itoa(i)
			node.Name = &name
		}
		if rng.IntN(2) == 0 {
			v := uuid.NewString()
			node.InstanceUUID = &v
		}
		if rng.IntN(2) == 0 {
			v := fmt.Sprintf("rc-%d", rng.IntN(4))
			node.ResourceClass = &v
		}
		if rng.IntN(2) == 0 {
			v := fmt.Sprintf("project-%d", rng.IntN(4))
			node.Owner = &v
		}
		if rng.IntN(4) == 0 {
			v := "power failure"
			node.Fault = &v
		}
		if rng.IntN(2) == 0 {
			node.UpdatedAt = &proto.Time{Time: base.Add(time.Duration(rng.IntN(1_000_000)) * time.Second)}
		}
		if err := s.CreateNode(ctx, node); err != nil {
			t.Fatal(err)
		}
		deref := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		nodeRows = append(nodeRows, pagedRow{uuid: node.UUID, id: i, keys: map[string]any{
			"id": i, "uuid": node.UUID, "name": deref(node.Name), "created_at": micros(node.CreatedAt),
			"updated_at": micros(node.UpdatedAt), "provision_updated_at": micros(node.ProvisionUpdatedAt),
			"provision_state": string(node.ProvisionState),
			"power_state":     string(*node.PowerState), "driver": node.Driver, "maintenance": node.Maintenance,
			"instance_uuid": deref(node.InstanceUUID), "conductor_group": node.ConductorGroup,
			"resource_class": deref(node.ResourceClass), "owner": deref(node.Owner), "fault": deref(node.Fault),
			"reservation": "",
		}})
	}
	// Ports hang off at most three nodes; the first holds a third of them.
	owners := nodeRows[:min(3, n)]
	portNode = owners[0].uuid
	for i := range n {
		now = base.Add(time.Duration(rng.IntN(1_000_000)) * time.Second)
		p := &proto.Port{
			UUID: uuid.NewString(), NodeUUID: owners[i%len(owners)].uuid, PXEEnabled: true,
			Address: fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", rng.IntN(256), rng.IntN(256), i/256%256, i%256),
			Extra:   proto.Dict{}, LocalLinkConnection: proto.Dict{}, InternalInfo: proto.Dict{},
		}
		if rng.IntN(2) == 0 {
			name := fmt.Sprintf("port-%06d-%d", rng.IntN(10*n+10), i)
			p.Name = &name
		}
		if rng.IntN(2) == 0 {
			p.UpdatedAt = &proto.Time{Time: base.Add(time.Duration(rng.IntN(1_000_000)) * time.Second)}
		}
		if err := s.CreatePort(ctx, p); err != nil {
			t.Fatal(err)
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		portRows = append(portRows, pagedRow{uuid: p.UUID, id: i, keys: map[string]any{
			"id": i, "uuid": p.UUID, "address": p.Address, "created_at": micros(p.CreatedAt),
			"updated_at": micros(p.UpdatedAt), "name": name, "node": p.NodeUUID,
		}})
	}
	return nodeRows, portRows, portNode
}

func compareKey(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case int:
		return cmp.Compare(a, b.(int))
	case int64:
		return cmp.Compare(a, b.(int64))
	case bool:
		switch {
		case a == b.(bool):
			return 0
		case a:
			return 1
		}
		return -1
	}
	panic(fmt.Sprintf("no order for %T", a))
}

// expectedOrder is the order the store promises: by key, then by insertion,
// both reversed for desc.
func expectedOrder(rows []pagedRow, key, dir string) []string {
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b pagedRow) int {
		c := compareKey(a.keys[key], b.keys[key])
		if c == 0 {
			c = cmp.Compare(a.id, b.id)
		}
		if dir == "desc" {
			c = -c
		}
		return c
	})
	out := make([]string, len(sorted))
	for i, r := range sorted {
		out[i] = r.uuid
	}
	return out
}

// walkRaw follows "next" from path until a page has none, returning every
// UUID seen, and fails on any answer but 200 or a next link that leaves the
// route or forgets the sort.
func walkRaw(t *testing.T, k *kiln, path, collection string) []string {
	t.Helper()
	var uuids []string
	wantPath := strings.SplitN(path, "?", 2)[0]
	for page := 0; path != ""; page++ {
		if page > 20_000 {
			t.Fatalf("walk of %s does not end", path)
		}
		code, _, b := k.call("GET", path, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		var body struct {
			Items []struct {
				UUID string `json:"uuid"`
			} `json:"-"`
			Next string `json:"next"`
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if err := json.Unmarshal(raw[collection], &body.Items); err != nil {
			t.Fatalf("GET %s: %s: %v", path, collection, err)
		}
		if n, ok := raw["next"]; ok {
			if err := json.Unmarshal(n, &body.Next); err != nil {
				t.Fatal(err)
			}
		}
		for _, it := range body.Items {
			uuids = append(uuids, it.UUID)
		}
		path = ""
		if body.Next != "" {
			u, err := url.Parse(body.Next)
			if err != nil {
				t.Fatalf("next %q: %v", body.Next, err)
			}
			if u.Path != wantPath {
				t.Fatalf("next link %q leaves %s", body.Next, wantPath)
			}
			path = u.RequestURI()
		}
	}
	return uuids
}

func sameOrder(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: walked %d items, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: item %d is %s, want %s", what, i, got[i], want[i])
		}
	}
}

func pagingQuery(key, dir string, limit int) string {
	q := url.Values{}
	if key != "" {
		q.Set("sort_key", key)
	}
	if dir != "" {
		q.Set("sort_dir", dir)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// TestPagingWalksEveryList follows "next" to the end of every list route,
// with gophercloud's pagers and with raw HTTP, for each sort key and
// direction, at 1, 100, 1,000 and 10,001 items: every item exactly once, in
// the store's order. Before the fix every next link carried sort_key=id and
// answered 400.
func TestPagingWalksEveryList(t *testing.T) {
	t.Parallel()
	sizes := []struct{ items, limit int }{{1, 1}, {100, 7}, {1000, 250}, {10001, 0}}
	if testing.Short() {
		t.Log("-short: 10,001 items not walked")
		sizes = sizes[:3]
	}
	for _, size := range sizes {
		t.Run(strconv.Itoa(size.items), func(t *testing.T) {
			t.Parallel() // each size has its own database and controller
			db := filepath.Join(t.TempDir(), "kiln.db")
			start := time.Now()
			nodeRows, portRows, portNode := enrollForPaging(t, db, size.items)
			t.Logf("enrolled %d nodes and %d ports in %v", size.items, size.items, time.Since(start).Round(time.Millisecond))
			k := startKiln(t, db)
			c := newClient(t, k, "1.95")
			ctx := context.Background()
			var nodePorts []pagedRow
			for _, r := range portRows {
				if r.keys["node"] == portNode {
					nodePorts = append(nodePorts, r)
				}
			}
			// Up to 1,000 items every route is walked with every key and
			// direction by both clients. At 10,001 (11 pages of the 1,000
			// maximum) raw HTTP walks /v1/nodes and /v1/ports with every key
			// and direction, gophercloud with the default key and name, and
			// the detail and per-node views (the same store query, rendered
			// differently) with the default key and direction: a full matrix
			// there takes over ten minutes on a shared two-core machine.
			big := size.items > 1000
			pagerKey := func(key string) bool { return !big || key == "" || key == "name" }
			var dir string // the direction being walked, for otherViews
			otherViews := func(key string) bool { return !big || key == "" && dir == "" }
			nodeKeys := append([]string{""}, store.NodeSortKeys...)
			portKeys := append([]string{""}, store.PortSortKeys...)
			// "" is the default (asc); "asc" named explicitly is checked with
			// the default key.
			for _, dir = range []string{"", "desc", "asc"} {
				if dir == "asc" {
					nodeKeys, portKeys = []string{""}, []string{""}
				}
				for _, key := range nodeKeys {
					wantKey, wantDir := cmp.Or(key, "id"), cmp.Or(dir, "asc")
					want := expectedOrder(nodeRows, wantKey, wantDir)
					q := pagingQuery(key, dir, size.limit)
					sameOrder(t, "raw /v1/nodes"+q, walkRaw(t, k, "/v1/nodes"+q, "nodes"), want)
					if !pagerKey(key) {
						continue
					}

					var got []string
					err := nodes.List(c, nodes.ListOpts{SortKey: key, SortDir: dir, Limit: size.limit}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
						ns, err := nodes.ExtractNodes(p)
						for _, n := range ns {
							got = append(got, n.UUID)
						}
						return true, err
					})
					if err != nil {
						t.Fatalf("gophercloud nodes.List%s: %v", q, err)
					}
					sameOrder(t, "gophercloud nodes.List"+q, got, want)

					if !otherViews(key) {
						continue
					}
					sameOrder(t, "raw /v1/nodes/detail"+q, walkRaw(t, k, "/v1/nodes/detail"+q, "nodes"), want)
					got = nil
					err = nodes.ListDetail(c, nodes.ListOpts{SortKey: key, SortDir: dir, Limit: size.limit}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
						ns, err := nodes.ExtractNodes(p)
						for _, n := range ns {
							got = append(got, n.UUID)
						}
						return true, err
					})
					if err != nil {
						t.Fatalf("gophercloud nodes.ListDetail%s: %v", q, err)
					}
					sameOrder(t, "gophercloud nodes.ListDetail"+q, got, want)
				}
				for _, key := range portKeys {
					wantKey, wantDir := cmp.Or(key, "id"), cmp.Or(dir, "asc")
					want := expectedOrder(portRows, wantKey, wantDir)
					wantNode := expectedOrder(nodePorts, wantKey, wantDir)
					q := pagingQuery(key, dir, size.limit)
					sameOrder(t, "raw /v1/ports"+q, walkRaw(t, k, "/v1/ports"+q, "ports"), want)
					if !pagerKey(key) {
						continue
					}

					walkPorts := func(list func() pagination.Pager, what string, want []string) {
						var got []string
						err := list().EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
							ps, err := ports.ExtractPorts(p)
							for _, x := range ps {
								got = append(got, x.UUID)
							}
							return true, err
						})
						if err != nil {
							t.Fatalf("gophercloud %s%s: %v", what, q, err)
						}
						sameOrder(t, "gophercloud "+what+q, got, want)
					}
					opts := ports.ListOpts{SortKey: key, SortDir: dir, Limit: size.limit}
					walkPorts(func() pagination.Pager { return ports.List(c, opts) }, "ports.List", want)
					if !otherViews(key) {
						continue
					}
					np := "/v1/nodes/" + portNode + "/ports"
					sameOrder(t, "raw "+np+q, walkRaw(t, k, np+q, "ports"), wantNode)
					byNode := opts
					byNode.Node = portNode
					walkPorts(func() pagination.Pager { return ports.List(c, byNode) }, "ports.List(node)", wantNode)
					sameOrder(t, "raw /v1/ports/detail"+q, walkRaw(t, k, "/v1/ports/detail"+q, "ports"), want)
					sameOrder(t, "raw "+np+"/detail"+q, walkRaw(t, k, np+"/detail"+q, "ports"), wantNode)
					walkPorts(func() pagination.Pager { return ports.ListDetail(c, opts) }, "ports.ListDetail", want)
				}
			}
		})
	}
}
