package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// cornersServer serves the API over a store holding one node in state.
func cornersServer(t *testing.T, state proto.ProvisionState) (*httptest.Server, store.Store, *proto.Node) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := &proto.Node{UUID: uuid.NewString(), Driver: "fake-hardware", ProvisionState: state,
		DriverInfo: proto.Dict{}, Properties: proto.Dict{}, Extra: proto.Dict{}, InstanceInfo: proto.Dict{},
		DriverInternalInfo: proto.Dict{}, Traits: []string{}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1"}))
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return srv, st, n
}

func send(t *testing.T, srv *httptest.Server, method, path, version, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("X-OpenStack-Ironic-API-Version", version)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var doc map[string]any
	_ = json.Unmarshal(b, &doc)
	return resp.StatusCode, doc
}

// Unprotecting a node drops its protected_reason, as Ironic does.
func TestUnprotectClearsReason(t *testing.T) {
	srv, st, n := cornersServer(t, proto.StateActive)
	code, doc := send(t, srv, "PATCH", "/v1/nodes/"+n.UUID, "1.95",
		`[{"op":"replace","path":"/protected","value":true},{"op":"add","path":"/protected_reason","value":"tenant data"}]`)
	if code != 200 || doc["protected"] != true || doc["protected_reason"] != "tenant data" {
		t.Fatalf("protect: %d %v", code, doc)
	}
	code, doc = send(t, srv, "PATCH", "/v1/nodes/"+n.UUID, "1.95", `[{"op":"replace","path":"/protected","value":false}]`)
	if code != 200 || doc["protected"] != false || doc["protected_reason"] != nil {
		t.Fatalf("unprotect: %d protected=%v protected_reason=%v", code, doc["protected"], doc["protected_reason"])
	}
	stored, err := st.GetNode(context.Background(), n.UUID)
	if err != nil || stored.Protected || stored.ProtectedReason != nil {
		t.Fatalf("stored after unprotect: %+v, %v", stored, err)
	}
}

// Before 1.2 Ironic showed "available" as no state (null).
func TestAvailableBelow1_2(t *testing.T) {
	srv, _, n := cornersServer(t, proto.StateAvailable)
	for _, tc := range []struct {
		version string
		want    any
	}{{"1.1", nil}, {"1.2", "available"}, {"1.95", "available"}} {
		code, doc := send(t, srv, "GET", "/v1/nodes/"+n.UUID, tc.version, "")
		if code != 200 || doc["provision_state"] != tc.want {
			t.Errorf("at %s: %d provision_state=%v, want %v", tc.version, code, doc["provision_state"], tc.want)
		}
	}
	// A node created at 1.1 starts available, and reads as null there.
	code, doc := send(t, srv, "POST", "/v1/nodes", "1.1", `{"driver":"fake-hardware"}`)
	if code != 201 || doc["provision_state"] != nil {
		t.Fatalf("create at 1.1: %d provision_state=%v", code, doc["provision_state"])
	}
}
