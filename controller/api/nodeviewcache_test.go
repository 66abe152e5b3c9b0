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

// TestDetailCacheFollowsTheStore: /v1/nodes/detail answered by a server
// whose renderings are kept is, after every kind of change to the nodes,
// byte for byte what a server with nothing kept answers over the same
// database: edits through the store, reservations taken and released, an
// agent's heartbeat (which rewrites the document alone), a state change,
// at several microversions and host names, with ?fields= pages between.
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
				for _, path := range []string{"/v1/nodes/detail", "/v1/nodes/detail?limit=5", "/v1/nodes?fields=uuid,extra"} {
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
}

// TestViewCacheBound: a viewCache holds at most viewCacheBytes, keeps what
// was put last, and never answers for a different view.
func TestViewCacheBound(t *testing.T) {
	var c viewCache
	doc := bytes.Repeat([]byte("d"), 100<<10)
	out := bytes.Repeat([]byte("o"), 100<<10)
	for i := range 2 * viewCacheBytes / (200 << 10) {
		k := viewKey{uuid: fmt.Sprint(i), base: "http://h", minor: 1}
		v := store.NodeView{UUID: k.uuid, ProvisionState: proto.StateActive, Doc: doc}
		c.put(k, &v, out)
		if c.size > viewCacheBytes {
			t.Fatalf("after %d puts the cache holds %d bytes, more than %d", i+1, c.size, viewCacheBytes)
		}
		if got, ok := c.get(k, &v); !ok || !bytes.Equal(got, out) {
			t.Fatalf("put %d: not kept", i)
		}
		res := "c1"
		other := v
		other.Reservation = &res
		if _, ok := c.get(k, &other); ok {
			t.Fatal("answered for a view with a reservation")
		}
		other = v
		other.Doc = append(bytes.Clone(doc[1:]), 'x')
		if _, ok := c.get(k, &other); ok {
			t.Fatal("answered for a view with another document")
		}
	}
	sum := 0
	for _, e := range c.entries {
		sum += e.size()
	}
	if sum != c.size {
		t.Fatalf("the cache counts %d bytes, holds %d", c.size, sum)
	}
}
