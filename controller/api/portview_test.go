package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// TestPortDocMatchesPort: a port rendered from its stored document has the
// bytes of the port decoded from the store and rendered by port, for
// random ports (secrets at depth in extra, internal_info and
// local_link_connection, escapes, odd numbers, names, port groups) at
// random microversions and field selections, in list order.
func TestPortDocMatchesPort(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	docs, ok := store.PortDocsOf(st)
	if !ok {
		t.Fatal("the SQLite store has no port documents")
	}
	r := rand.New(rand.NewPCG(5, 6))
	node := &proto.Node{UUID: "0d1e2f3a-0000-4000-8000-000000000001", Driver: "fake-hardware", ProvisionState: proto.StateEnroll}
	if err := st.CreateNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		p := &proto.Port{UUID: fmt.Sprintf("5e1e2f3a-0000-4000-8000-%012d", i), NodeUUID: node.UUID,
			Address: fmt.Sprintf("52:54:00:00:00:%02x", i), PXEEnabled: r.IntN(2) == 0, IsSmartNIC: r.IntN(3) == 0,
			Extra: oddDict(r), InternalInfo: oddDict(r), LocalLinkConnection: oddDict(r)}
		if r.IntN(2) == 0 {
			name := []string{"eth<0>", "ünï", "quote\"", "plain"}[r.IntN(4)] + fmt.Sprint(i)
			p.Name = &name
		}
		if r.IntN(3) == 0 {
			p.Extra, p.InternalInfo = nil, proto.Dict{}
		}
		if i%2 == 0 {
			p.LocalLinkConnection["switch_info"] = map[string]any{"password": "s3cr3t"}
		}
		if r.IntN(2) == 0 {
			phys := "physnet&1"
			p.PhysicalNetwork = &phys
		}
		if err := st.CreatePort(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, 0, len(portWireFields))
	for _, f := range portWireFields {
		names = append(names, f.name)
	}
	e := echo.New()
	for trial := range 200 {
		minor := 1 + r.IntN(MaxMinor)
		var fields []string
		switch r.IntN(3) {
		case 1:
			fields = proto.PortDefaultListFields
		case 2:
			fields = []string{}
			for range 1 + r.IntN(5) {
				if f := names[r.IntN(len(names))]; proto.PortFieldMinVersion[f] <= minor {
					fields = append(fields, f)
				}
			}
		}
		c := e.NewContext(httptest.NewRequest("GET", "/v1/ports", nil), httptest.NewRecorder())
		c.Set(ctxMinor, minor)
		plan := planFields(portWireFields, minor, fields)
		q := store.PortQuery{Limit: 1 + r.IntN(40), SortKey: []string{"", "address", "name"}[r.IntN(3)], SortDir: []string{"asc", "desc"}[r.IntN(2)]}
		ports, err := st.ListPorts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		list, err := docs.ListPortDocs(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != len(ports) {
			t.Fatalf("%d documents, %d ports", len(list), len(ports))
		}
		for i := range ports {
			want, got := getWriter(), getWriter()
			if err := want.port(c, ports[i], plan); err != nil {
				t.Fatal(err)
			}
			if err := got.portDoc(c, baseURL(c), list[i], plan); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.buf.Bytes(), want.buf.Bytes()) {
				t.Fatalf("trial %d, port %s at 1.%d fields %v:\n doc  %s\n port %s", trial, ports[i].UUID, minor, fields, got.buf.Bytes(), want.buf.Bytes())
			}
			if bytes.Contains(got.buf.Bytes(), []byte("s3cr3t")) {
				t.Fatalf("trial %d shows a secret: %s", trial, got.buf.Bytes())
			}
			putWriter(want)
			putWriter(got)
		}
	}
}

// TestPortDocFallback: a document that is not encoding/json's (spaces,
// members out of order, a field missing as in a document written before
// the field existed) renders as its decoded port does.
func TestPortDocFallback(t *testing.T) {
	e := echo.New()
	c := e.NewContext(httptest.NewRequest("GET", "/v1/ports", nil), httptest.NewRecorder())
	c.Set(ctxMinor, MaxMinor)
	plan := planFields(portWireFields, MaxMinor, nil)
	for _, doc := range []string{
		`{"uuid":"u-1","address":"52:54:00:00:00:01","extra":{"password":"s3cr3t","a":[1,"x"]}}`,
		`{"address": "52:54:00:00:00:01", "uuid": "u-1", "extra": {"password": "s3cr3t", "a": [1, "x"]}}`,
		`{"uuid":"u\u002d1","address":"52:54:00:00:00:01","extra":{"password":"s3cr3t","a":[1,"x"]}}`,
	} {
		p := new(proto.Port)
		if err := json.Unmarshal([]byte(doc), p); err != nil {
			t.Fatal(err)
		}
		want, got := getWriter(), getWriter()
		if err := want.port(c, p, plan); err != nil {
			t.Fatal(err)
		}
		if err := got.portDoc(c, baseURL(c), []byte(doc), plan); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.buf.Bytes(), want.buf.Bytes()) {
			t.Fatalf("document %s:\n doc  %s\n port %s", doc, got.buf.Bytes(), want.buf.Bytes())
		}
		if bytes.Contains(got.buf.Bytes(), []byte("s3cr3t")) {
			t.Fatalf("document %s shows a secret: %s", doc, got.buf.Bytes())
		}
	}
}

func TestMayHoldSecret(t *testing.T) {
	for _, c := range []struct {
		val  string
		want bool
	}{
		{`{}`, false},
		{`null`, false},
		{`{"switch_id":"0a:1b:2c:3d:4e:5f","port_id":"Ethernet1/1"}`, false},
		{`{"a":[1,"x",{"y":true}],"ünï":"☃"}`, false},
		{`{"password":"x"}`, true},
		{`{"a":{"deep":{"auth_token":null}}}`, true},
		{`{"switch_info":"apiKey"}`, true}, // a value: conservative
		{`{"pass\u0077ord":"x"}`, true},    // an escape: decode to tell
		{`{"a":"<\u003c>"}`, true},         // the same
		{`{"a":"unterminated`, true},       // not JSON: decode (and fail)
	} {
		if got := mayHoldSecret([]byte(c.val)); got != c.want {
			t.Errorf("mayHoldSecret(%s) = %v, want %v", c.val, got, c.want)
		}
	}
}
