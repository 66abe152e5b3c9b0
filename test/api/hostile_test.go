package api_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/kilnproc"
)

// hostileRequest is one entry of testdata/hostile.json: a request an
// attacker or a broken client might send, and the status Kiln must answer.
// Placeholders in braces ({node}, {port_mac}, …) name the fixtures below.
type hostileRequest struct {
	Name    string            `json:"name"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    *string           `json:"body"`
	// Gen builds a body too large or too odd to keep in the file:
	// prefix + (repeat or the bytes of repeat_hex) × n + middle + close × n + suffix.
	Gen *struct {
		Prefix    string `json:"prefix"`
		Repeat    string `json:"repeat"`
		RepeatHex string `json:"repeat_hex"`
		N         int    `json:"n"`
		Middle    string `json:"middle"`
		Close     string `json:"close"`
		Suffix    string `json:"suffix"`
	} `json:"gen"`
	HeaderGen *struct {
		Name   string `json:"name"`
		Repeat string `json:"repeat"`
		N      int    `json:"n"`
	} `json:"header_gen"`
	Status int `json:"status"`
	// Fragment, when set, must appear in the response body.
	Fragment string `json:"fragment"`
}

func (h *hostileRequest) body(t *testing.T, fill func(string) string) []byte {
	t.Helper()
	switch {
	case h.Body != nil:
		return []byte(fill(*h.Body))
	case h.Gen != nil:
		unit := []byte(h.Gen.Repeat)
		if h.Gen.RepeatHex != "" {
			var err error
			if unit, err = hex.DecodeString(h.Gen.RepeatHex); err != nil {
				t.Fatalf("%s: repeat_hex: %v", h.Name, err)
			}
		}
		var b bytes.Buffer
		b.WriteString(fill(h.Gen.Prefix))
		b.Write(bytes.Repeat(unit, h.Gen.N))
		b.WriteString(h.Gen.Middle)
		b.WriteString(strings.Repeat(h.Gen.Close, h.Gen.N))
		b.WriteString(fill(h.Gen.Suffix))
		return b.Bytes()
	}
	return nil
}

// hostileFixtures enrolls, straight into the database, the objects the corpus
// aims at: an enrolled node with a named port and a second port, an active
// node. They belong to a conductor group no controller serves, and the test's
// controller serves none of the groups the corpus creates nodes in, so
// nothing but the requests themselves changes the database.
func hostileFixtures(t *testing.T, db string) map[string]string {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	name, activeName, portName := "hostile-node", "hostile-active", "hostile-port"
	node := &proto.Node{UUID: uuid.NewString(), Name: &name, Driver: "fake-hardware", ProvisionState: proto.StateEnroll,
		ConductorGroup: "unserved", DriverInfo: proto.Dict{}, Properties: proto.Dict{}, Extra: proto.Dict{},
		InstanceInfo: proto.Dict{}, DriverInternalInfo: proto.Dict{}, Traits: []string{}}
	active := *node
	active.UUID, active.Name, active.ProvisionState = uuid.NewString(), &activeName, proto.StateActive
	for _, n := range []*proto.Node{node, &active} {
		if err := s.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	port := &proto.Port{UUID: uuid.NewString(), NodeUUID: node.UUID, Address: "52:54:00:aa:00:01", Name: &portName,
		PXEEnabled: true, Extra: proto.Dict{}, InternalInfo: proto.Dict{}, LocalLinkConnection: proto.Dict{}}
	port2 := *port
	port2.UUID, port2.Address, port2.Name = uuid.NewString(), "52:54:00:aa:00:02", nil
	for _, p := range []*proto.Port{port, &port2} {
		if err := s.CreatePort(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]string{
		"{node}": node.UUID, "{node_name}": name, "{active}": active.UUID,
		"{port}": port.UUID, "{port2}": port2.UUID, "{port_name}": portName, "{port_mac}": port.Address,
	}
}

// storedState is everything a refused request must leave alone, as the API
// shows it.
func storedState(t *testing.T, k *kiln) string {
	t.Helper()
	var all []byte
	for _, p := range []string{"/v1/nodes/detail", "/v1/ports/detail"} {
		code, _, b := k.call("GET", p, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, code, b)
		}
		all = append(all, b...)
	}
	return string(all)
}

// TestHostileCorpus sends every request of testdata/hostile.json to a real
// `kiln serve` and checks its status, that no answer is a 5xx, that every
// refusal is in Ironic's error format, and that a refused request changed
// nothing stored.
func TestHostileCorpus(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "hostile.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Requests []hostileRequest `json:"requests"`
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "kiln.db")
	fx := hostileFixtures(t, db)
	fill := func(s string) string {
		for k, v := range fx {
			s = strings.ReplaceAll(s, k, v)
		}
		return s
	}
	// The provision route's body limit is lowered so the corpus can show
	// --body-limit at work without sending 64 MiB.
	k := &kiln{Proc: kilnproc.Start(t, kilnBin, db, "--conductor", "hostile", "--conductor-group", "hostile-none",
		"--body-limit", "provision=2097152"), t: t}

	var server5xx, mismatches int
	for _, h := range corpus.Requests {
		body := h.body(t, fill)
		before := ""
		if h.Status >= 400 {
			before = storedState(t, k)
		}
		req, err := http.NewRequestWithContext(context.Background(), h.Method, k.URL+fill(h.Path), bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
		if len(body) > 0 {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range h.Headers {
			req.Header.Set(k, v)
		}
		if h.HeaderGen != nil {
			req.Header.Set(h.HeaderGen.Name, strings.Repeat(h.HeaderGen.Repeat, h.HeaderGen.N))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s: %v", h.Name, err)
			mismatches++
			continue
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			server5xx++
		}
		if resp.StatusCode != h.Status {
			mismatches++
			t.Errorf("%s: %s %.80s answered %d, want %d: %.300s", h.Name, h.Method, h.Path, resp.StatusCode, h.Status, got)
			continue
		}
		if h.Fragment != "" && !strings.Contains(string(got), fill(h.Fragment)) {
			mismatches++
			t.Errorf("%s: answer lacks %q: %.300s", h.Name, fill(h.Fragment), got)
		}
		// net/http answers 431 itself, before any handler: not our format.
		if h.Status >= 400 && h.Status != http.StatusRequestHeaderFieldsTooLarge {
			if !ironicError(got) {
				mismatches++
				t.Errorf("%s: %d not in Ironic's error format: %.300s", h.Name, resp.StatusCode, got)
			}
			if after := storedState(t, k); after != before {
				mismatches++
				t.Errorf("%s: refused with %d, yet the stored nodes or ports changed", h.Name, resp.StatusCode)
			}
		}
	}
	t.Logf("hostile corpus: %d requests, %d answered 5xx, %d mismatches", len(corpus.Requests), server5xx, mismatches)
	if server5xx > 0 {
		t.Errorf("%d requests answered 5xx", server5xx)
	}
}

// ironicError reports whether b is Ironic's error body: error_message holding
// a JSON document with a faultstring (or the framework's description).
func ironicError(b []byte) bool {
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if json.Unmarshal(b, &outer) != nil || outer.ErrorMessage == "" {
		return false
	}
	var inner map[string]any
	if json.Unmarshal([]byte(outer.ErrorMessage), &inner) != nil {
		return false
	}
	_, fs := inner["faultstring"].(string)
	_, desc := inner["description"].(string)
	return fs || desc
}
