package api_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// FuzzRouter drives the whole API in-process with arbitrary methods, paths,
// one arbitrary header and bodies, against a real SQLite store holding a node
// and a port. No request may panic or answer 5xx. The seeds are the requests
// of the hostile-request corpus (test/api/testdata/hostile.json).
func FuzzRouter(f *testing.F) {
	ctx := context.Background()
	dir := f.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "fuzz.db"), store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	name := "fuzz-node"
	node := &proto.Node{UUID: uuid.NewString(), Name: &name, Driver: "fake-hardware", ProvisionState: proto.StateEnroll,
		DriverInfo: proto.Dict{}, Properties: proto.Dict{}, Extra: proto.Dict{}, InstanceInfo: proto.Dict{},
		DriverInternalInfo: proto.Dict{}, Traits: []string{}}
	if err := st.CreateNode(ctx, node); err != nil {
		f.Fatal(err)
	}
	portName := "fuzz-port"
	port := &proto.Port{UUID: uuid.NewString(), NodeUUID: node.UUID, Address: "52:54:00:fe:00:01", Name: &portName,
		Extra: proto.Dict{}, InternalInfo: proto.Dict{}, LocalLinkConnection: proto.Dict{}}
	if err := st.CreatePort(ctx, port); err != nil {
		f.Fatal(err)
	}
	srv := api.New(api.Config{Store: st, Conductor: "fuzz", BodyLimits: map[string]int64{"provision": 1 << 20}})

	fill := strings.NewReplacer("{node}", node.UUID, "{node_name}", name, "{active}", node.UUID, "{port}", port.UUID,
		"{port2}", port.UUID, "{port_name}", portName, "{port_mac}", port.Address)
	for _, s := range hostileSeeds(f) {
		f.Add(s.method, fill.Replace(s.path), s.header, s.value, []byte(fill.Replace(string(s.body))))
	}

	f.Fuzz(func(t *testing.T, method, path, header, value string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://kiln.test"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		if header != "" {
			req.Header.Set(header, value)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q (%s: %q) answered %d: %s", method, path, header, value, rec.Code, rec.Body.Bytes())
		}
	})
}

type hostileSeed struct {
	method, path, header, value string
	body                        []byte
}

// hostileSeeds reads the hostile-request corpus, keeping generated bodies
// short enough to make useful seeds.
func hostileSeeds(f *testing.F) []hostileSeed {
	raw, err := os.ReadFile(filepath.Join("..", "..", "test", "api", "testdata", "hostile.json"))
	if err != nil {
		f.Fatal(err)
	}
	var corpus struct {
		Requests []struct {
			Method  string            `json:"method"`
			Path    string            `json:"path"`
			Headers map[string]string `json:"headers"`
			Body    *string           `json:"body"`
			Gen     *struct {
				Prefix, Repeat, Middle, Close, Suffix string
				RepeatHex                             string `json:"repeat_hex"`
				N                                     int
			} `json:"gen"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		f.Fatal(err)
	}
	var out []hostileSeed
	for _, r := range corpus.Requests {
		s := hostileSeed{method: r.Method, path: r.Path, header: "X-OpenStack-Ironic-API-Version", value: "1.95"}
		for k, v := range r.Headers {
			s.header, s.value = k, v
		}
		switch {
		case r.Body != nil:
			s.body = []byte(*r.Body)
		case r.Gen != nil:
			unit := []byte(r.Gen.Repeat)
			if r.Gen.RepeatHex != "" {
				unit, _ = hex.DecodeString(r.Gen.RepeatHex)
			}
			n := min(r.Gen.N, 300)
			s.body = []byte(r.Gen.Prefix + string(bytes.Repeat(unit, n)) + r.Gen.Middle + strings.Repeat(r.Gen.Close, n) + r.Gen.Suffix)
		}
		out = append(out, s)
	}
	return out
}
