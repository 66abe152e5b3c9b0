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
	"time"

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

	// A heartbeat with no news is a narrow stamp: the row's version stays,
	// and yet what is answered shows it, kept or not.
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	if v, err = st.AgentOf(ctx, uuids[2]); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.RecordAgent(ctx, v, []store.KeyValue{{Key: proto.InfoAgentLastHeartbeat, Value: t0.Format(time.RFC3339Nano)}}, false); err != nil || !ok {
		t.Fatalf("RecordAgent = %v, %v", ok, err)
	}
	check("a heartbeat recorded")
	for i, at := range []time.Time{t0.Add(25 * time.Second), t0.Add(50*time.Second + 123456*time.Microsecond)} {
		if v, err = st.AgentOf(ctx, uuids[2]); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RecordSeen(ctx, v, at); err != nil || !ok {
			t.Fatalf("RecordSeen = %v, %v", ok, err)
		}
		check(fmt.Sprintf("narrow heartbeat %d", i))
		want := `"agent_last_heartbeat":"` + at.Format(time.RFC3339Nano) + `"`
		if got := get(kept, "/v1/nodes/detail", "kiln.example:6385", "latest"); !bytes.Contains(got, []byte(want)) {
			t.Fatalf("narrow heartbeat %d: /detail lacks %s: %s", i, want, got)
		}
		if got := get(kept, "/v1/nodes/"+uuids[2]+"?fields=driver_internal_info", "kiln.example:6385", "latest"); !bytes.Contains(got, []byte(want)) {
			t.Fatalf("narrow heartbeat %d: GET ?fields=driver_internal_info lacks %s: %s", i, want, got)
		}
	}

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

// betweenStore runs a write between a page's versions and its views, as
// another client may.
type betweenStore struct {
	store.Store
	vv      store.VersionedNodeViews
	between func(ctx context.Context) error // run once
}

func (d *betweenStore) Unwrap() store.Store { return d.Store }

func (d *betweenStore) ListNodeVersions(ctx context.Context, q store.NodeQuery) ([]store.NodeVersion, error) {
	return d.vv.ListNodeVersions(ctx, q)
}

func (d *betweenStore) NodeViewsByID(ctx context.Context, ids []int64) ([]store.VersionedView, error) {
	if d.between != nil {
		if err := d.between(ctx); err != nil {
			return nil, err
		}
		d.between = nil
	}
	return d.vv.NodeViewsByID(ctx, ids)
}

// TestDetailNodeWrittenBetweenReads: a node deleted, or written so that it
// leaves the filter, between the page's versions and its views is left
// out of the page, which is read whole after the write.
func TestDetailNodeWrittenBetweenReads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, st store.Store, uuid string) error
	}{
		{"deleted", func(ctx context.Context, st store.Store, uuid string) error { return st.DeleteNode(ctx, uuid) }},
		{"left the filter", func(ctx context.Context, st store.Store, uuid string) error {
			_, err := st.UpdateNode(ctx, uuid, func(n *proto.Node) error { n.ProvisionState = proto.StateManageable; return nil })
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var uuids []string
			for i := range 4 {
				n := &proto.Node{UUID: fmt.Sprintf("0d1e2f3a-0000-4000-8000-%012d", i), Driver: "fake-hardware",
					ProvisionState: proto.StateAvailable, Extra: proto.Dict{"i": i}}
				if err := st.CreateNode(ctx, n); err != nil {
					t.Fatal(err)
				}
				uuids = append(uuids, n.UUID)
			}
			vv, ok := store.VersionedViewsOf(st)
			if !ok {
				t.Fatal("the SQLite store has no versioned views")
			}
			bs := &betweenStore{Store: st, vv: vv, between: func(ctx context.Context) error { return tc.write(ctx, st, uuids[2]) }}
			srv := httptest.NewServer(New(Config{Store: bs, Conductor: "c1"}))
			defer srv.Close()
			req, err := http.NewRequest("GET", srv.URL+"/v1/nodes/detail?limit=3&provision_state=available", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET: %d %v %s", resp.StatusCode, err, b)
			}
			if bs.between != nil {
				t.Fatal("the page's views were not read by id")
			}
			for i, u := range uuids {
				if got, want := bytes.Contains(b, []byte(`"uuid":"`+u+`"`)), i != 2; got != want {
					t.Errorf("node %d in the page: %v, want %v: %s", i, got, want, b)
				}
			}
		})
	}
}
