package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/jsonscan"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// maskedCol reads the node's masked_doc column as stored ("" for NULL).
func maskedCol(t *testing.T, st Store, uuid string) (string, bool) {
	t.Helper()
	s := st.(*sqlStore)
	var m *string
	if err := s.queryRow(context.Background(), s.wdb, "SELECT masked_doc FROM nodes WHERE uuid = ?", uuid).Scan(&m); err != nil {
		t.Fatal(err)
	}
	if m == nil {
		return "", false
	}
	return *m, true
}

// wantView is the view of the node as GetNode returns it: masked, without
// reservation, encoded by encoding/json, lined.
func wantView(t *testing.T, st Store, uuid string) []byte {
	t.Helper()
	n, err := st.GetNode(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	n.Reservation = nil
	m := secrets.Node(n)
	b, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	lined, err := jsonscan.ToLined(b)
	if err != nil {
		t.Fatal(err)
	}
	return lined
}

// TestNodeViews: a node's view is its masked document, written with the
// node, made stale (NULL) by a write of doc alone (RecordAgent's json_set)
// and then derived on read, never served stale; lists and gets agree.
func TestNodeViews(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		views, ok := ViewsOf(st)
		if !ok {
			t.Fatal("the SQL store has no NodeViews")
		}
		name := "view-node"
		lastErr := "image http://admin:hunter2@10.0.0.9/img failed"
		n := &proto.Node{UUID: "6f0e3c1a-1a2b-4c3d-8e9f-0a1b2c3d4e5f", Name: &name, Driver: "fake-hardware",
			ProvisionState: proto.StateDeployWait, LastError: &lastErr,
			DriverInfo:         proto.Dict{"ipmi_password": "hunter2", "ipmi_address": "10.0.0.1", "nested": map[string]any{"token": "t0p"}},
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"},
			Properties:         proto.Dict{"cpus": 4, "big": json.Number("12345678901234567890"), "html": "<a&b>"}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		col, ok := maskedCol(t, st, n.UUID)
		if !ok {
			t.Fatal("CreateNode left masked_doc NULL")
		}
		if strings.Contains(col, "hunter2") || strings.Contains(col, "t0p") || strings.Contains(col, `"tok"`) {
			t.Fatalf("masked_doc holds a secret: %s", col)
		}
		check := func(stage string) {
			t.Helper()
			want := wantView(t, st, n.UUID)
			v, err := views.GetNodeView(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(v.Doc, want) || v.UUID != n.UUID {
				t.Fatalf("%s: GetNodeView = %s\nwant %s", stage, v.Doc, want)
			}
			vs, err := views.ListNodeViews(ctx, NodeQuery{Limit: 10})
			if err != nil || len(vs) != 1 || !bytes.Equal(vs[0].Doc, want) {
				t.Fatalf("%s: ListNodeViews = %d views, %v", stage, len(vs), err)
			}
			sameListed(t, stage, &vs[0], &v)
		}
		check("created")

		v, err := st.AgentOf(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RecordAgent(ctx, v, []KeyValue{{proto.InfoAgentURL, "http://10.0.0.5:9999"}}, true); err != nil || !ok {
			t.Fatalf("RecordAgent = %v, %v", ok, err)
		}
		if col, ok := maskedCol(t, st, n.UUID); ok {
			t.Fatalf("masked_doc kept after a doc-only write: %s", col)
		}
		check("after RecordAgent")
		if v, _ := views.GetNodeView(ctx, n.UUID); !bytes.Contains(v.Doc, []byte("10.0.0.5:9999")) {
			t.Fatalf("derived view lacks the recorded agent URL: %s", v.Doc)
		}

		if _, err := st.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.Extra = proto.Dict{"k": "v"}; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, ok := maskedCol(t, st, n.UUID); !ok {
			t.Fatal("UpdateNode left masked_doc NULL")
		}
		check("after UpdateNode")

		if _, err := st.Reserve(ctx, n.UUID, "cond-a"); err != nil {
			t.Fatal(err)
		}
		if v, err := views.GetNodeView(ctx, n.UUID); err != nil || v.Reservation == nil || *v.Reservation != "cond-a" {
			t.Fatalf("GetNodeView of a reserved node = %+v, %v", v.Reservation, err)
		}
		check("reserved")
		if err := st.Release(ctx, n.UUID, "cond-a"); err != nil {
			t.Fatal(err)
		}
		// A reservation holding the separator of the list's one-column
		// row: the page is read column by column, with the same views.
		if _, err := st.Reserve(ctx, n.UUID, "cond"+summarySep+"1"+summarySep+"{"); err != nil {
			t.Fatal(err)
		}
		check("reserved by a name holding the separator")
		if _, err := views.GetNodeView(ctx, "no-such-node"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetNodeView(unknown) = %v, want ErrNotFound", err)
		}
	})
}

// sameListed fails unless a listed view has a got view's fields.
func sameListed(t *testing.T, stage string, listed, got *NodeView) {
	t.Helper()
	if listed.UUID != got.UUID || listed.ProvisionState != got.ProvisionState || !bytes.Equal(listed.Doc, got.Doc) ||
		(listed.Reservation == nil) != (got.Reservation == nil) ||
		listed.Reservation != nil && *listed.Reservation != *got.Reservation {
		t.Fatalf("%s: listed view %+v, got %+v", stage, *listed, *got)
	}
}
