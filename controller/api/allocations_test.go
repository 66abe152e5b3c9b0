package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// allocServer is the API on a fresh SQLite store, without a conductor:
// allocations stay allocating unless backfilled. notified collects the
// allocations the API handed to the conductor.
func allocServer(t *testing.T) (*httptest.Server, store.Store, *[]string) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var notified []string
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1", LockWait: -1,
		NotifyAllocation: func(u string) { notified = append(notified, u) }}))
	t.Cleanup(srv.Close)
	return srv, st, &notified
}

// putNode stores a node as a conductor would have left it.
func putNode(t *testing.T, st store.Store, name string, state proto.ProvisionState, rc string, traits ...string) *proto.Node {
	t.Helper()
	n := &proto.Node{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", len(name)*1000+int(name[len(name)-1])),
		Name: &name, Driver: "fake-hardware", ProvisionState: state, ResourceClass: &rc, Traits: traits,
		InstanceInfo: proto.Dict{}, Extra: proto.Dict{}, DriverInfo: proto.Dict{}, Properties: proto.Dict{}}
	if err := st.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAllocationsMatchAPIReference: create, show, list and update with the
// API reference's requests; every answer has the reference's shape.
func TestAllocationsMatchAPIReference(t *testing.T) {
	srv, st, notified := allocServer(t)
	code, created := call(t, srv, "POST", "/v1/allocations", "1.60", apiRefSample(t, "allocation-create-request.json"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, created)
	}
	sameShape(t, "create", apiRefJSON(t, "allocation-create-response.json"), created)
	if created["state"] != "allocating" || created["name"] != "allocation-1" || created["resource_class"] != "bm-large" {
		t.Errorf("created %v", created)
	}
	id := created["uuid"].(string)
	if len(*notified) != 1 || (*notified)[0] != id {
		t.Errorf("conductor notified of %v, want [%s]", *notified, id)
	}
	code, second := call(t, srv, "POST", "/v1/allocations", "1.60", apiRefSample(t, "allocation-create-request-2.json"))
	if code != http.StatusCreated || fmt.Sprint(second["traits"]) != "[CUSTOM_GOLD]" {
		t.Fatalf("create 2: %d %v", code, second)
	}
	// A backfilled allocation is active: the shape of show and list.
	n := putNode(t, st, "node-1", proto.StateActive, "bm-large")
	code, active := call(t, srv, "POST", "/v1/allocations", "1.60", `{"name":"allocation-3","node":"node-1"}`)
	if code != http.StatusCreated || active["state"] != "active" || active["node_uuid"] != n.UUID || active["resource_class"] != "bm-large" {
		t.Fatalf("backfill: %d %v", code, active)
	}
	getShapes(t, srv, "1.60", []shapeCase{
		{"/v1/allocations/" + active["uuid"].(string), "allocation-show-response.json"},
		{"/v1/allocations/allocation-3", "allocation-show-response.json"},
		{"/v1/allocations", "allocations-list-response.json"},
		{"/v1/nodes/node-1/allocation", "allocation-show-response.json"},
	})
	code, patched := call(t, srv, "PATCH", "/v1/allocations/"+id, "1.60", apiRefSample(t, "allocation-update-request.json"))
	if code != http.StatusOK {
		t.Fatalf("patch: %d %v", code, patched)
	}
	sameShape(t, "patch", apiRefJSON(t, "allocation-update-response.json"), patched)
	if fmt.Sprint(patched["extra"]) != "map[foo:bar]" || patched["updated_at"] == nil || patched["state"] != "allocating" {
		t.Errorf("patched %v", patched)
	}
	_, node := call(t, srv, "GET", "/v1/nodes/node-1", "1.60", "")
	if node["allocation_uuid"] != active["uuid"] || node["instance_uuid"] != active["uuid"] {
		t.Errorf("backfilled node: allocation_uuid %v instance_uuid %v", node["allocation_uuid"], node["instance_uuid"])
	}
	_, node = call(t, srv, "GET", "/v1/nodes/node-1", "1.51", "")
	if _, ok := node["allocation_uuid"]; ok {
		t.Error("allocation_uuid shown at 1.51")
	}
	_, got := call(t, srv, "GET", "/v1/allocations/"+id, "1.59", "")
	if _, ok := got["owner"]; ok || got["uuid"] != id {
		t.Errorf("at 1.59: %v (owner must be hidden)", got)
	}
}

// TestAllocationErrors: Ironic's status and message for each refusal, and
// nothing stored.
func TestAllocationErrors(t *testing.T) {
	srv, st, _ := allocServer(t)
	putNode(t, st, "avail", proto.StateAvailable, "gold")
	code, a := call(t, srv, "POST", "/v1/allocations", "1.60", `{"name":"taken","resource_class":"gold"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, a)
	}
	for _, tc := range []struct {
		method, path, version, body string
		code                        int
		msg                         string
	}{
		{"GET", "/v1/allocations", "1.51", "", 404, ""},
		{"POST", "/v1/allocations", "1.51", `{"resource_class":"gold"}`, 405, ""},
		{"PATCH", "/v1/allocations/taken", "1.56", `[{"op":"add","path":"/extra/a","value":"b"}]`, 405, ""},
		{"POST", "/v1/allocations", "1.59", `{"resource_class":"gold","owner":"p"}`, 406, ""},
		{"GET", "/v1/allocations?owner=p", "1.59", "", 406, ""},
		{"GET", "/v1/allocations?fields=owner", "1.59", "", 406, ""},
		{"POST", "/v1/allocations", "1.60", `{"name":"x"}`, 400, "The resource_class field is mandatory when not backfilling"},
		{"POST", "/v1/allocations", "1.60", `{"resource_class":"gold","name":"bad name"}`, 400, "Cannot create allocation with invalid name 'bad name'"},
		{"POST", "/v1/allocations", "1.60", `{"resource_class":"gold","name":"taken"}`, 409, "An allocation with name taken already exists."},
		{"POST", "/v1/allocations", "1.60", `{"resource_class":"gold","uuid":"` + a["uuid"].(string) + `"}`, 409, "An allocation with UUID " + a["uuid"].(string) + " already exists."},
		{"POST", "/v1/allocations", "1.60", `{"resource_class":"gold","traits":["gold"]}`, 400, "Schema error for allocation: 'gold' is not valid under any of the given schemas"},
		{"POST", "/v1/allocations", "1.60", `{"resource_class":"` + strings.Repeat("x", 81) + `"}`, 400, ""},
		{"POST", "/v1/allocations", "1.60", `{"resource_class":"gold","candidate_nodes":["avail","nope","gone"]}`, 400, "Nodes cannot be found: nope, gone"},
		{"POST", "/v1/allocations", "1.60", `{"resource_class":"gold","state":"active"}`, 400, "Schema error for allocations: Additional properties are not allowed ('state' was unexpected)"},
		{"POST", "/v1/allocations", "1.57", `{"node":"avail"}`, 400, "Cannot set node when creating an allocation in this API version"},
		{"POST", "/v1/allocations", "1.60", `{"node":"nope"}`, 400, "Node nope could not be found."},
		{"GET", "/v1/allocations/nope", "1.60", "", 404, "Allocation nope could not be found."},
		{"GET", "/v1/allocations/aaaaaaaa-0000-4000-8000-000000000000", "1.60", "", 404, "Allocation aaaaaaaa-0000-4000-8000-000000000000 could not be found."},
		{"DELETE", "/v1/allocations/nope", "1.60", "", 404, "Allocation nope could not be found."},
		{"GET", "/v1/allocations?node=nope", "1.60", "", 400, "Node nope could not be found."},
		{"PATCH", "/v1/allocations/taken", "1.60", `[{"op":"replace","path":"/resource_class","value":"x"}]`, 400, ""},
		{"PATCH", "/v1/allocations/taken", "1.60", `[{"op":"replace","path":"/name","value":"bad name"}]`, 400, "Cannot update allocation with invalid name 'bad name'"},
		{"GET", "/v1/nodes/avail/allocation", "1.60", "", 404, "Allocation for node avail was not found"},
		{"GET", "/v1/nodes/nope/allocation", "1.60", "", 400, "Node nope could not be found."},
		{"GET", "/v1/nodes/avail/allocation", "1.51", "", 404, ""},
		{"DELETE", "/v1/nodes/avail/allocation", "1.60", "", 404, "Allocation for node avail was not found"},
	} {
		code, body := call(t, srv, tc.method, tc.path, tc.version, tc.body)
		if code != tc.code {
			t.Errorf("%s %s %s at %s: %d %v, want %d", tc.method, tc.path, tc.body, tc.version, code, body, tc.code)
			continue
		}
		if tc.msg != "" {
			if got := ironicFault(t, body); got != tc.msg {
				t.Errorf("%s %s %s: %q, want %q", tc.method, tc.path, tc.body, got, tc.msg)
			}
		}
	}
	_, list := call(t, srv, "GET", "/v1/allocations", "1.60", "")
	if items := list["allocations"].([]any); len(items) != 1 {
		t.Errorf("refused requests stored allocations: %v", items)
	}
}

// TestAllocationBackfillAndRelease: backfilling onto active nodes, the
// refusals, and deleting allocations where Ironic allows it.
func TestAllocationBackfillAndRelease(t *testing.T) {
	ctx := context.Background()
	srv, st, _ := allocServer(t)
	web := putNode(t, st, "web", proto.StateActive, "gold", "CUSTOM_A")
	avail := putNode(t, st, "avail", proto.StateAvailable, "gold")

	// Onto an available node: Ironic's AllocationFailed (a 500), the
	// allocation kept in error with the reason.
	code, body := call(t, srv, "POST", "/v1/allocations", "1.60", `{"name":"a-avail","node":"avail"}`)
	if code != http.StatusInternalServerError {
		t.Fatalf("backfill onto an available node: %d %v", code, body)
	}
	_, failed := call(t, srv, "GET", "/v1/allocations/a-avail", "1.60", "")
	if failed["state"] != "error" || !strings.Contains(fmt.Sprint(failed["last_error"]), `Node must be in the "active" state`) || failed["node_uuid"] != nil {
		t.Errorf("failed backfill: %v", failed)
	}
	if n, _ := st.GetNode(ctx, avail.UUID); n.AllocationUUID != nil {
		t.Error("a failed backfill changed the node")
	}
	// Traits that do not match.
	if code, _ := call(t, srv, "POST", "/v1/allocations", "1.60", `{"node":"web","traits":["CUSTOM_B"]}`); code != http.StatusInternalServerError {
		t.Errorf("backfill with other traits: %d", code)
	}
	// A matching backfill, with the instance's UUID kept when it has one.
	if _, err := st.UpdateNode(ctx, web.UUID, func(n *proto.Node) error {
		inst := "11111111-1111-4111-8111-111111111111"
		n.InstanceUUID = &inst
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	code, a := call(t, srv, "POST", "/v1/allocations", "1.60", `{"node":"`+web.UUID+`","traits":["CUSTOM_A"]}`)
	if code != http.StatusCreated || a["uuid"] != "11111111-1111-4111-8111-111111111111" || a["state"] != "active" {
		t.Fatalf("backfill: %d %v", code, a)
	}
	// A second allocation cannot take the node.
	if code, body := call(t, srv, "POST", "/v1/allocations", "1.60", `{"node":"web"}`); code != http.StatusConflict {
		t.Errorf("second backfill: %d %v", code, body)
	}
	// The node is active: neither the allocation nor the node may go.
	for _, path := range []string{"/v1/allocations/" + a["uuid"].(string), "/v1/nodes/web/allocation"} {
		code, body := call(t, srv, "DELETE", path, "1.60", "")
		if code != http.StatusConflict || !strings.Contains(ironicFault(t, body), "because the node is active (and maintenance mode is off)") {
			t.Errorf("DELETE %s of an active node's allocation: %d %v", path, code, body)
		}
	}
	if code, _ := call(t, srv, "DELETE", "/v1/nodes/web", "1.60", ""); code != http.StatusConflict {
		t.Errorf("DELETE of a node with an allocation: %d, want 409", code)
	}
	// In maintenance it may: the node is freed.
	if _, err := st.UpdateNode(ctx, web.UUID, func(n *proto.Node) error { n.Maintenance = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, srv, "DELETE", "/v1/nodes/web/allocation", "1.60", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE node allocation in maintenance: %d %v", code, body)
	}
	n, _ := st.GetNode(ctx, web.UUID)
	if n.AllocationUUID != nil || n.InstanceUUID != nil {
		t.Errorf("node not released: allocation %v instance %v", n.AllocationUUID, n.InstanceUUID)
	}
	if code, _ := call(t, srv, "GET", "/v1/allocations/"+a["uuid"].(string), "1.60", ""); code != http.StatusNotFound {
		t.Errorf("deleted allocation still served: %d", code)
	}
	// Deleting a node in maintenance orphans its allocation, as Ironic does.
	code, b := call(t, srv, "POST", "/v1/allocations", "1.60", `{"name":"again","node":"web"}`)
	if code != http.StatusCreated {
		t.Fatalf("backfill again: %d %v", code, b)
	}
	if code, body := call(t, srv, "DELETE", "/v1/nodes/web", "1.60", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE node in maintenance: %d %v", code, body)
	}
	_, orphan := call(t, srv, "GET", "/v1/allocations/again", "1.60", "")
	if orphan["node_uuid"] != nil || orphan["state"] != "active" {
		t.Errorf("orphaned allocation: %v", orphan)
	}
}

// TestAllocationLists: filters, fields, paging and sorting.
func TestAllocationLists(t *testing.T) {
	srv, st, _ := allocServer(t)
	putNode(t, st, "web", proto.StateActive, "gold")
	for i, rc := range []string{"gold", "silver", "gold", "silver", "gold"} {
		body := fmt.Sprintf(`{"name":"a%d","resource_class":"%s","owner":"p%d"}`, i, rc, i%2)
		if code, got := call(t, srv, "POST", "/v1/allocations", "1.60", body); code != http.StatusCreated {
			t.Fatalf("create: %d %v", code, got)
		}
	}
	if code, got := call(t, srv, "POST", "/v1/allocations", "1.60", `{"name":"b","node":"web"}`); code != http.StatusCreated {
		t.Fatalf("backfill: %d %v", code, got)
	}
	names := func(body map[string]any) string {
		var out []string
		for _, it := range body["allocations"].([]any) {
			out = append(out, fmt.Sprint(it.(map[string]any)["name"]))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct{ query, want string }{
		{"", "a0,a1,a2,a3,a4,b"},
		{"?resource_class=silver", "a1,a3"},
		{"?state=active", "b"},
		{"?state=allocating&resource_class=gold", "a0,a2,a4"},
		{"?owner=p1", "a1,a3"},
		{"?node=web", "b"},
		{"?sort_key=name&sort_dir=desc", "b,a4,a3,a2,a1,a0"},
		{"?sort_key=resource_class&sort_dir=desc&limit=3", "a3,a1,b"},
	} {
		code, got := call(t, srv, "GET", "/v1/allocations"+tc.query, "1.60", "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", tc.query, code, got)
		}
		if n := names(got); n != tc.want {
			t.Errorf("GET /v1/allocations%s = %s, want %s", tc.query, n, tc.want)
		}
	}
	// Pages of two follow the next links to the end.
	var seen []string
	path := "/v1/allocations?limit=2&sort_key=name"
	for path != "" {
		code, got := call(t, srv, "GET", path, "1.60", "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		if n := names(got); n != "" {
			seen = append(seen, n)
		}
		next, _ := got["next"].(string)
		path = strings.TrimPrefix(next, srv.URL)
		if len(seen) > 10 {
			t.Fatal("paging does not end")
		}
	}
	if strings.Join(seen, "|") != "a0,a1|a2,a3|a4,b" {
		t.Errorf("pages %v", seen)
	}
	code, got := call(t, srv, "GET", "/v1/allocations?fields=uuid,state&limit=1", "1.60", "")
	item := got["allocations"].([]any)[0].(map[string]any)
	if code != http.StatusOK || len(item) != 3 || item["state"] != "allocating" || item["links"] == nil {
		t.Errorf("fields=uuid,state: %d %v", code, item)
	}
	if code, _ := call(t, srv, "GET", "/v1/allocations?sort_key=traits", "1.60", ""); code != http.StatusBadRequest {
		t.Errorf("sort by traits: %d, want 400", code)
	}
}

// TestAllocationEndsWithInstanceRemoval: removing a node's instance_uuid
// ends its allocation where Ironic allows it (409 on an active node outside
// maintenance).
func TestAllocationEndsWithInstanceRemoval(t *testing.T) {
	ctx := context.Background()
	srv, st, _ := allocServer(t)
	web := putNode(t, st, "web", proto.StateActive, "gold")
	code, a := call(t, srv, "POST", "/v1/allocations", "1.60", `{"name":"a","node":"web"}`)
	if code != http.StatusCreated {
		t.Fatalf("backfill: %d %v", code, a)
	}
	remove := `[{"op":"remove","path":"/instance_uuid"}]`
	code, body := call(t, srv, "PATCH", "/v1/nodes/web", "1.60", remove)
	if code != http.StatusConflict || !strings.Contains(ironicFault(t, body), "with an allocation can not have instance_uuid removed unless it is in one of allowed") {
		t.Fatalf("remove instance_uuid of an active node: %d %v", code, body)
	}
	if _, err := st.UpdateNode(ctx, web.UUID, func(n *proto.Node) error { n.Maintenance = true; return nil }); err != nil {
		t.Fatal(err)
	}
	code, node := call(t, srv, "PATCH", "/v1/nodes/web", "1.60", remove)
	if code != http.StatusOK || node["instance_uuid"] != nil || node["allocation_uuid"] != nil {
		t.Fatalf("remove instance_uuid in maintenance: %d %v", code, node)
	}
	if code, _ := call(t, srv, "GET", "/v1/allocations/a", "1.60", ""); code != http.StatusNotFound {
		t.Errorf("the allocation outlived its instance: %d", code)
	}
}
