package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// TestDetailCacheFollowsTheStore: /v1/nodes/detail and /v1/nodes answered
// by a server whose renderings are kept are, after every kind of change to
// the nodes, byte for byte what a server with nothing kept answers over
// the same database: edits through the store, reservations taken and
// released, an agent's heartbeat (which rewrites the document alone), a
// state change, a node deleted and enrolled again, at several
// microversions and host names, with ?fields= pages between.
func TestDetailCacheFollowsTheStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var uuids []string
	for i := range 12 {
		name := fmt.Sprintf("cache-%d", i)
		n := &proto.Node{UUID: fmt.Sprintf("0d1e2f3a-0000-4000-8000-%012d", i), Name: &name, Driver: "fake-hardware",
			ProvisionState: proto.StateDeployWait, DriverInfo: proto.Dict{"ipmi_password": "secret-pw"},
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}, Extra: proto.Dict{"i": i}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, n.UUID)
	}
	kept := httptest.NewServer(New(Config{Store: st, Conductor: "c1"}))
	defer kept.Close()
	get := func(srv *httptest.Server, path, host, version string) []byte {
		t.Helper()
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("X-OpenStack-Ironic-API-Version", version)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v %s", path, resp.StatusCode, err, b)
		}
		return b
	}
	check := func(step string) {
		t.Helper()
		fresh := httptest.NewServer(New(Config{Store: st, Conductor: "c1"}))
		defer fresh.Close()
		for _, host := range []string{"kiln.example:6385", "other.example"} {
			for _, version := range []string{"1.1", "1.38", "1.82", "latest"} {
				for _, path := range []string{"/v1/nodes/detail", "/v1/nodes/detail?limit=5", "/v1/nodes", "/v1/nodes?limit=5&sort_key=name",
					"/v1/nodes?fields=uuid,extra"} {
					if version == "1.1" && strings.Contains(path, "fields") {
						continue
					}
					got, want := get(kept, path, host, version), get(fresh, path, host, version)
					if !bytes.Equal(got, want) {
						t.Fatalf("%s: GET %s at %s from %s:\n kept  %s\n fresh %s", step, path, version, host, got, want)
					}
					if bytes.Contains(got, []byte("secret-pw")) || bytes.Contains(got, []byte(`"tok"`)) {
						t.Fatalf("%s: a secret shows: %s", step, got)
					}
				}
			}
		}
	}
	check("first reads")
	check("second reads, from what was kept")

	if _, err := st.UpdateNode(ctx, uuids[0], func(n *proto.Node) error { n.Extra["i"] = "changed"; return nil }); err != nil {
		t.Fatal(err)
	}
	check("an edit")

	if _, err := st.Reserve(ctx, uuids[1], "c1"); err != nil {
		t.Fatal(err)
	}
	check("a reservation")
	if err := st.Release(ctx, uuids[1], "c1"); err != nil {
		t.Fatal(err)
	}
	check("a release")

	v, err := st.AgentOf(ctx, uuids[2])
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.RecordAgent(ctx, v, []store.KeyValue{{Key: proto.InfoAgentURL, Value: "http://10.0.0.5:9999"}}, true); err != nil || !ok {
		t.Fatalf("RecordAgent = %v, %v", ok, err)
	}
	check("a heartbeat")

	if _, err := st.UpdateNode(ctx, uuids[3], func(n *proto.Node) error {
		n.ProvisionState = proto.StateInspectWait
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("a state the old microversions rename")

	if _, err := st.Reserve(ctx, uuids[4], "gone-conductor"); err != nil {
		t.Fatal(err)
	}
	check("a reservation by a conductor not alive")
	if released, err := st.ReleaseDead(ctx); err != nil || len(released) != 1 || released[0] != uuids[4] {
		t.Fatalf("ReleaseDead = %v, %v", released, err)
	}
	check("the reservations of dead conductors released")

	// The same UUID again, as a new row: its version starts over, as the
	// old row's did, so what was kept must be told apart by row id.
	if err := st.DeleteNode(ctx, uuids[5]); err != nil {
		t.Fatal(err)
	}
	check("a node deleted")
	again := "enrolled-again"
	n := &proto.Node{UUID: uuids[5], Name: &again, Driver: "fake-hardware", ProvisionState: proto.StateDeployWait,
		Extra: proto.Dict{"i": "again"}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	check("a node enrolled again under its UUID")
}

// deletingStore deletes a node between a page's versions and its views,
// as another client may.
type deletingStore struct {
	store.Store
	vv     store.VersionedNodeViews
	delete string // the node to delete, once
}

func (d *deletingStore) Unwrap() store.Store { return d.Store }

func (d *deletingStore) ListNodeVersions(ctx context.Context, q store.NodeQuery) ([]store.NodeVersion, error) {
	return d.vv.ListNodeVersions(ctx, q)
}

func (d *deletingStore) NodeViewsByID(ctx context.Context, ids []int64) ([]store.VersionedView, error) {
	if d.delete != "" {
		if err := d.Store.DeleteNode(ctx, d.delete); err != nil {
			return nil, err
		}
		d.delete = ""
	}
	return d.vv.NodeViewsByID(ctx, ids)
}

// TestDetailNodeDeletedBetweenReads: a node deleted between the page's
// versions and its views is left out of the page, which is the page read
// whole after the deletion.
func TestDetailNodeDeletedBetweenReads(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var uuids []string
	for i := range 4 {
		n := &proto.Node{UUID: fmt.Sprintf("0d1e2f3a-0000-4000-8000-%012d", i), Driver: "fake-hardware", Extra: proto.Dict{"i": i}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, n.UUID)
	}
	vv, ok := store.VersionedViewsOf(st)
	if !ok {
		t.Fatal("the SQLite store has no versioned views")
	}
	ds := &deletingStore{Store: st, vv: vv, delete: uuids[2]}
	srv := httptest.NewServer(New(Config{Store: ds, Conductor: "c1"}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/nodes/detail?limit=3")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d %v %s", resp.StatusCode, err, b)
	}
	if ds.delete != "" {
		t.Fatal("the page's views were not read by id")
	}
	for i, u := range uuids {
		if got, want := bytes.Contains(b, []byte(`"uuid":"`+u+`"`)), i != 2; got != want {
			t.Errorf("node %d in the page: %v, want %v: %s", i, got, want, b)
		}
	}
}

// TestViewCacheBound: a viewCache holds at most viewCacheBytes, keeps what
// was put last, and never answers for another row version, base URL or
// microversion.
func TestViewCacheBound(t *testing.T) {
	var c viewCache
	out := bytes.Repeat([]byte("o"), 200<<10)
	for i := range 2 * viewCacheBytes / (200 << 10) {
		k := viewKey{id: int64(i), base: "http://h", minor: 1}
		uuid := fmt.Sprintf("node-%d", i)
		c.put(k, 7, uuid, out)
		if c.size > viewCacheBytes {
			t.Fatalf("after %d puts the cache holds %d bytes, more than %d", i+1, c.size, viewCacheBytes)
		}
		if u, got, ok := c.get(k, 7); !ok || u != uuid || !bytes.Equal(got, out) {
			t.Fatalf("put %d: not kept", i)
		}
		for _, other := range []struct {
			k       viewKey
			version int64
		}{
			{k, 8}, {k, 6},
			{viewKey{id: k.id, base: "http://other", minor: 1}, 7},
			{viewKey{id: k.id, base: k.base, minor: 2}, 7},
			{viewKey{id: k.id + 1, base: k.base, minor: 1}, 7},
		} {
			if _, _, ok := c.get(other.k, other.version); ok {
				t.Fatalf("put %d: answered for %+v version %d", i, other.k, other.version)
			}
		}
	}
	sum := 0
	for _, e := range c.entries {
		sum += e.size()
	}
	if sum != c.size {
		t.Fatalf("the cache counts %d bytes, holds %d", c.size, sum)
	}
	if len(c.entries) < viewCacheBytes/2/(200<<10) {
		t.Fatalf("the cache holds %d entries after its bound, fewer than half of what fits", len(c.entries))
	}
}
