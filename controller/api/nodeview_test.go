package api

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// TestNodeViewMatchesNode: a node rendered from its stored view has the
// bytes of the node decoded from the store and rendered by node, for random
// nodes (secrets at depth, escapes, odd numbers, reservations, the states
// older microversions rename, views made stale by an agent heartbeat) at
// random microversions and field selections.
func TestNodeViewMatchesNode(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	views, ok := store.ViewsOf(st)
	if !ok {
		t.Fatal("the SQLite store has no views")
	}
	r := rand.New(rand.NewPCG(3, 4))
	states := []proto.ProvisionState{proto.StateAvailable, proto.StateInspectWait, proto.StateActive, proto.StateDeployWait}
	var uuids []string
	for i := range 60 {
		name := fmt.Sprintf("n<&>-%d", i)
		desc := []string{"plain", "ünïcödé", "quote\" back\\slash", "\x01ctl\ttab", "a\u2028b"}[r.IntN(5)]
		lastErr := "failed: https://user:pw@bmc/ agent_token=abc"
		n := &proto.Node{UUID: fmt.Sprintf("0d1e2f3a-0000-4000-8000-%012d", i), Name: &name, Driver: "fake-hardware",
			ProvisionState: states[i%len(states)], DriverInfo: oddDict(r), InstanceInfo: oddDict(r),
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}, Properties: oddDict(r), Extra: oddDict(r),
			Description: &desc, Traits: []string{"CUSTOM_A"}, Maintenance: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			n.LastError = &lastErr
		}
		if r.IntN(4) == 0 {
			n.DriverInfo, n.Properties = nil, nil
		}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 1: // stale view: the heartbeat's json_set writes doc alone
			v, err := st.AgentOf(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := st.RecordAgent(ctx, v, []store.KeyValue{{Key: proto.InfoAgentURL, Value: "http://10.0.0.5:9999"}}, true); err != nil || !ok {
				t.Fatalf("RecordAgent = %v, %v", ok, err)
			}
		case 2:
			if _, err := st.Reserve(ctx, n.UUID, "cond<&>"); err != nil {
				t.Fatal(err)
			}
		}
		uuids = append(uuids, n.UUID)
	}
	names := make([]string, 0, len(nodeWireFields))
	for _, f := range nodeWireFields {
		names = append(names, f.name)
	}
	e := echo.New()
	for trial := range 600 {
		uuid := uuids[r.IntN(len(uuids))]
		minor := 1 + r.IntN(MaxMinor)
		var fields []string
		switch r.IntN(3) {
		case 1:
			fields = proto.NodeDefaultListFields
		case 2:
			fields = []string{}
			for range 1 + r.IntN(6) {
				if f := names[r.IntN(len(names))]; proto.NodeFieldMinVersion[f] <= minor {
					fields = append(fields, f)
				}
			}
		}
		req := httptest.NewRequest("GET", "/v1/nodes", nil)
		c := e.NewContext(req, httptest.NewRecorder())
		c.Set(ctxMinor, minor)
		plan := nodePlan(c, fields)

		n, err := st.GetNode(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		want := getWriter()
		if err := want.node(c, n, plan); err != nil {
			t.Fatal(err)
		}
		v, err := views.GetNodeView(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		got := getWriter()
		if err := got.nodeView(c, baseURL(c), &v, plan); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.buf.Bytes(), want.buf.Bytes()) {
			t.Fatalf("trial %d, node %s at 1.%d fields %v:\n view %s\n node %s", trial, uuid, minor, fields, got.buf.Bytes(), want.buf.Bytes())
		}
		if bytes.Contains(got.buf.Bytes(), []byte(`"tok"`)) || bytes.Contains(got.buf.Bytes(), []byte("user:pw")) {
			t.Fatalf("trial %d shows a secret: %s", trial, got.buf.Bytes())
		}
		putWriter(want)
		putWriter(got)
	}
}

// TestNodeViewFallback: a view that is not lined (compact, as views were
// first written) is split member by member, and one that is not even
// compact (spaces, as another writer might leave) is decoded, each with the
// same output.
func TestNodeViewFallback(t *testing.T) {
	e := echo.New()
	c := e.NewContext(httptest.NewRequest("GET", "/v1/nodes", nil), httptest.NewRecorder())
	c.Set(ctxMinor, MaxMinor)
	res := "cond-a"
	n := &proto.Node{UUID: "u-1", Driver: "fake-hardware", ProvisionState: proto.StateActive, Reservation: &res,
		Extra: proto.Dict{"a": []any{1.0, "x"}}}
	plan := nodePlan(c, nil)
	want := getWriter()
	if err := want.node(c, n, plan); err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		`{"uuid":"u-1","driver":"fake-hardware","provision_state":"active","extra":{"a":[1,"x"]}}`,
		`{"uuid": "u-1", "driver": "fake-hardware", "provision_state": "active", "extra": {"a": [1, "x"]}}`,
	} {
		v := store.NodeView{UUID: "u-1", ProvisionState: proto.StateActive, Reservation: &res, Doc: []byte(doc)}
		got := getWriter()
		if err := got.nodeView(c, baseURL(c), &v, plan); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.buf.Bytes(), want.buf.Bytes()) {
			t.Fatalf("view %s:\n view %s\n node %s", doc, got.buf.Bytes(), want.buf.Bytes())
		}
	}
}
