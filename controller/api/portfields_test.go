package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
)

// TestPortsMatchAPIReference creates a port with the API reference's
// request (a node named by node_ident, 1.94, and the 1.97–1.101 fields),
// lists and updates it, and compares each answer's shape with the
// reference's, at the newest microversion.
func TestPortsMatchAPIReference(t *testing.T) {
	srv := chassisServer(t)
	decode := func(name string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(apiRefSample(t, name)), &m); err != nil {
			t.Fatal(err)
		}
		// The reference's samples predate 1.111's field.
		if _, ok := m["address"]; ok && api.MaxMinor >= 111 {
			m["available_for_dynamic_portgroup"] = true
		}
		return m
	}
	var req map[string]any
	json.Unmarshal([]byte(apiRefSample(t, "port-create-request.json")), &req)
	node, group := req["node_ident"].(string), req["portgroup_uuid"].(string)
	mustCall(t, srv, 201, "POST", "/v1/nodes", "1.95", `{"driver":"fake-hardware","uuid":"`+node+`"}`)
	mustCall(t, srv, 201, "POST", "/v1/portgroups", "latest", `{"node_uuid":"`+node+`","uuid":"`+group+`"}`)

	created := mustCall(t, srv, 201, "POST", "/v1/ports", "latest", apiRefSample(t, "port-create-request.json"))
	sameShape(t, "create", decode("port-create-response.json"), created)
	for k, want := range map[string]any{"node_uuid": node, "portgroup_uuid": group, "description": "Physical Network",
		"vendor": "splitrock", "category": "hypernet", "available_for_dynamic_portgroup": true, "name": "port1"} {
		if created[k] != want {
			t.Errorf("created %s = %v, want %v", k, created[k], want)
		}
	}
	list := mustCall(t, srv, 200, "GET", "/v1/ports/detail", "latest", "")
	sample := decode("port-list-detail-response.json")["ports"].([]any)[0].(map[string]any)
	sample["available_for_dynamic_portgroup"] = true
	sameShape(t, "list detail", sample, list["ports"].([]any)[0])
	id := created["uuid"].(string)
	updated := mustCall(t, srv, 200, "PATCH", "/v1/ports/"+id, "latest", apiRefSample(t, "port-update-request.json"))
	sameShape(t, "update", decode("port-update-response.json"), updated)
	if updated["address"] != "22:22:22:22:22:22" {
		t.Errorf("updated address %v", updated["address"])
	}
}

// TestPortFieldGating: each port field of 1.97–1.111 is hidden below its
// microversion and refused there (406) in a create, a patch and ?fields=;
// from it, it is stored, shown and patched, and removing it restores
// Ironic's default.
func TestPortFieldGating(t *testing.T) {
	srv := chassisServer(t)
	node := mustCall(t, srv, 201, "POST", "/v1/nodes", "1.95", `{"driver":"fake-hardware","name":"gate"}`)["uuid"].(string)
	for i, f := range []struct {
		name      string
		since     int
		set, next any // a value to create with, one to patch to
		unset     any // after a remove
	}{
		{"description", 97, "first", "second", nil},
		{"vendor", 100, "acme", "initech", nil},
		{"category", 101, "storage", "uplink", nil},
		{"available_for_dynamic_portgroup", 111, false, false, true},
	} {
		t.Run(f.name, func(t *testing.T) {
			below, at := fmt.Sprintf("1.%d", f.since-1), fmt.Sprintf("1.%d", f.since)
			val := func(v any) string { b, _ := json.Marshal(v); return string(b) }
			body := fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:00:00:01:%02x",%q:%s}`, node, i, f.name, val(f.set))
			if code, out := call(t, srv, "POST", "/v1/ports", below, body); code != http.StatusNotAcceptable {
				t.Fatalf("create with %s at %s: %d %v, want 406", f.name, below, code, out)
			}
			p := mustCall(t, srv, 201, "POST", "/v1/ports", at, body)
			if p[f.name] != f.set {
				t.Errorf("created at %s: %s = %v, want %v", at, f.name, p[f.name], f.set)
			}
			id := p["uuid"].(string)
			if got := mustCall(t, srv, 200, "GET", "/v1/ports/"+id, below, ""); got[f.name] != nil || len(got) == 0 {
				t.Errorf("GET at %s shows %s: %v", below, f.name, got)
			} else if _, shown := got[f.name]; shown {
				t.Errorf("GET at %s has key %s", below, f.name)
			}
			if code, _ := call(t, srv, "GET", "/v1/ports/"+id+"?fields="+f.name, below, ""); code != http.StatusNotAcceptable {
				t.Errorf("?fields=%s at %s: %d, want 406", f.name, below, code)
			}
			got := mustCall(t, srv, 200, "GET", "/v1/ports/"+id+"?fields=uuid,"+f.name, at, "")
			if got[f.name] != f.set {
				t.Errorf("?fields= at %s: %v", at, got)
			}
			patch := fmt.Sprintf(`[{"op":"replace","path":"/%s","value":%s}]`, f.name, val(f.next))
			if code, _ := call(t, srv, "PATCH", "/v1/ports/"+id, below, patch); code != http.StatusNotAcceptable {
				t.Errorf("patch at %s: %d, want 406", below, code)
			}
			if got := mustCall(t, srv, 200, "PATCH", "/v1/ports/"+id, at, patch); got[f.name] != f.next {
				t.Errorf("patched: %s = %v, want %v", f.name, got[f.name], f.next)
			}
			got = mustCall(t, srv, 200, "PATCH", "/v1/ports/"+id, at, `[{"op":"remove","path":"/`+f.name+`"}]`)
			if got[f.name] != f.unset {
				t.Errorf("removed: %s = %v, want %v", f.name, got[f.name], f.unset)
			}
			mustCall(t, srv, 204, "DELETE", "/v1/ports/"+id, at, "")
		})
	}

	// A new port is available for dynamic port groups unless told not.
	p := mustCall(t, srv, 201, "POST", "/v1/ports", "1.111", `{"node_uuid":"`+node+`","address":"52:54:00:00:02:01"}`)
	if p["available_for_dynamic_portgroup"] != true || p["description"] != nil || p["vendor"] != nil || p["category"] != nil {
		t.Errorf("defaults: %v", p)
	}
	if code, _ := call(t, srv, "POST", "/v1/ports", "1.111", `{"node_uuid":"`+node+`","address":"52:54:00:00:02:02","available_for_dynamic_portgroup":"yes"}`); code != http.StatusBadRequest {
		t.Errorf("a string for the boolean: %d, want 400", code)
	}
	// Ironic's lengths; nothing is stored.
	for field, max := range map[string]int{"description": 255, "vendor": 32, "category": 80} {
		body := fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:00:00:03:01",%q:%q}`, node, field, strings.Repeat("x", max+1))
		if code, out := call(t, srv, "POST", "/v1/ports", "latest", body); code != http.StatusBadRequest {
			t.Errorf("%s of %d characters: %d %v, want 400", field, max+1, code, out)
		}
		patch := fmt.Sprintf(`[{"op":"add","path":"/%s","value":%q}]`, field, strings.Repeat("x", max+1))
		if code, _ := call(t, srv, "PATCH", "/v1/ports/"+p["uuid"].(string), "latest", patch); code != http.StatusBadRequest {
			t.Errorf("patch %s of %d characters: %d, want 400", field, max+1, code)
		}
	}
	if got := mustCall(t, srv, 200, "GET", "/v1/ports?address=52:54:00:00:03:01", "latest", "")["ports"].([]any); len(got) != 0 {
		t.Errorf("a refused port was stored: %v", got)
	}
}

// TestPortNodeIdent: from 1.94 a port's node may be named by node_ident,
// a name or a UUID, instead of node_uuid; one of them, not both.
func TestPortNodeIdent(t *testing.T) {
	srv := chassisServer(t)
	node := mustCall(t, srv, 201, "POST", "/v1/nodes", "1.95", `{"driver":"fake-hardware","name":"rack1-n1"}`)["uuid"].(string)
	for _, c := range []struct {
		version, body string
		want          int
	}{
		{"1.93", `{"node_ident":"rack1-n1","address":"52:54:00:00:04:01"}`, http.StatusNotAcceptable},
		{"1.94", `{"node_ident":"rack1-n1","address":"52:54:00:00:04:01"}`, http.StatusCreated},
		{"1.94", `{"node_ident":"` + node + `","address":"52:54:00:00:04:02"}`, http.StatusCreated},
		{"1.94", `{"node_ident":"rack1-n1","node_uuid":"` + node + `","address":"52:54:00:00:04:03"}`, http.StatusBadRequest},
		{"1.94", `{"node_ident":"no-such-node","address":"52:54:00:00:04:04"}`, http.StatusBadRequest},
		{"1.94", `{"node_ident":"","address":"52:54:00:00:04:05"}`, http.StatusBadRequest},
		{"1.94", `{"node_ident":7,"address":"52:54:00:00:04:06"}`, http.StatusBadRequest},
		{"1.94", `{"address":"52:54:00:00:04:07"}`, http.StatusBadRequest},
		// A name in node_uuid stays refused, as Ironic's schema does.
		{"1.94", `{"node_uuid":"rack1-n1","address":"52:54:00:00:04:08"}`, http.StatusBadRequest},
	} {
		code, out := call(t, srv, "POST", "/v1/ports", c.version, c.body)
		if code != c.want {
			t.Errorf("%s %s: %d %v, want %d", c.version, c.body, code, out, c.want)
			continue
		}
		if code == http.StatusCreated && out["node_uuid"] != node {
			t.Errorf("%s: node_uuid %v, want %s", c.body, out["node_uuid"], node)
		}
		if _, shown := out["node_ident"]; shown {
			t.Errorf("%s: the answer shows node_ident: %v", c.body, out)
		}
	}
	// node_ident is not a port field: it cannot be patched.
	ports := mustCall(t, srv, 200, "GET", "/v1/ports", "1.94", "")["ports"].([]any)
	if len(ports) != 2 {
		t.Fatalf("ports: %v", ports)
	}
	id := ports[0].(map[string]any)["uuid"].(string)
	if code, _ := call(t, srv, "PATCH", "/v1/ports/"+id, "1.94", `[{"op":"replace","path":"/node_ident","value":"x"}]`); code != http.StatusBadRequest {
		t.Errorf("patch node_ident: %d, want 400", code)
	}
}

// TestPortPlacementFilters: ports and port groups listed by their node's
// conductor group (1.99) and shard (ports 1.82, port groups 1.106), with
// Ironic's rules on combining them, following a node that changes group.
func TestPortPlacementFilters(t *testing.T) {
	srv := chassisServer(t)
	var nodes []string
	for i, n := range []string{`"conductor_group":"rack-a","shard":"s1"`, `"conductor_group":"rack-b"`, `"shard":"s2"`} {
		id := mustCall(t, srv, 201, "POST", "/v1/nodes", "latest", `{"driver":"fake-hardware",`+n+`}`)["uuid"].(string)
		nodes = append(nodes, id)
		mustCall(t, srv, 201, "POST", "/v1/ports", "latest", fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:00:00:05:%02x"}`, id, i))
		mustCall(t, srv, 201, "POST", "/v1/portgroups", "latest", fmt.Sprintf(`{"node_uuid":%q,"name":"pg%d"}`, id, i))
	}
	listed := func(path, version, key, field string) []string {
		t.Helper()
		out := mustCall(t, srv, 200, "GET", path, version, "")
		var got []string
		for _, o := range out[key].([]any) {
			got = append(got, fmt.Sprint(o.(map[string]any)[field]))
		}
		return got
	}
	mac := func(i int) string { return fmt.Sprintf("52:54:00:00:05:%02x", i) }
	var shards []string
	for i := range 101 {
		shards = append(shards, fmt.Sprintf("s%d", i))
	}
	manyShards := strings.Join(shards, ",")
	for _, c := range []struct {
		path, version string
		want          []string
	}{
		{"/v1/ports?conductor_groups=rack-a", "1.99", []string{mac(0)}},
		{"/v1/ports?conductor_group=RACK-B", "1.99", []string{mac(1)}},
		{"/v1/ports?conductor_groups=rack-a,rack-b", "1.99", []string{mac(0), mac(1)}},
		{"/v1/ports?conductor_groups=rack-c", "1.99", nil},
		{"/v1/ports?shard=s1,s2", "1.82", []string{mac(0), mac(2)}},
		{"/v1/ports?shard=s2&limit=1&conductor_groups=", "1.82", []string{mac(2)}},
	} {
		if got := listed(c.path, c.version, "ports", "address"); !slices.Equal(got, c.want) {
			t.Errorf("GET %s: %v, want %v", c.path, got, c.want)
		}
	}
	for _, c := range []struct {
		path, version string
		want          []string
	}{
		{"/v1/portgroups?conductor_groups=rack-a", "1.99", []string{"pg0"}},
		{"/v1/portgroups?conductor_group=rack-a,rack-b", "1.99", []string{"pg0", "pg1"}},
		{"/v1/portgroups?shard=s2", "1.106", []string{"pg2"}},
		{"/v1/portgroups?shard=s1,s2", "1.106", []string{"pg0", "pg2"}},
	} {
		if got := listed(c.path, c.version, "portgroups", "name"); !slices.Equal(got, c.want) {
			t.Errorf("GET %s: %v, want %v", c.path, got, c.want)
		}
	}
	for _, c := range []struct {
		path, version string
		want          int
	}{
		{"/v1/ports?conductor_groups=rack-a", "1.98", http.StatusNotAcceptable},
		{"/v1/ports?conductor_group=rack-a", "1.98", http.StatusNotAcceptable},
		{"/v1/ports?shard=s1", "1.81", http.StatusNotAcceptable},
		{"/v1/portgroups?conductor_groups=rack-a", "1.98", http.StatusNotAcceptable},
		{"/v1/portgroups?shard=s1", "1.105", http.StatusNotAcceptable},
		{"/v1/ports?conductor_groups=rack-a&node=" + nodes[0], "1.99", http.StatusBadRequest},
		{"/v1/ports?conductor_groups=rack-a&address=" + mac(0), "1.99", http.StatusBadRequest},
		{"/v1/nodes/" + nodes[0] + "/ports?conductor_groups=rack-a", "1.99", http.StatusBadRequest},
		{"/v1/ports?shard=s1&node=" + nodes[0], "1.99", http.StatusForbidden},
		{"/v1/portgroups?shard=s1&node=" + nodes[0], "1.106", http.StatusBadRequest},
		{"/v1/portgroups?conductor_groups=rack-a&address=52:54:00:00:09:09", "1.106", http.StatusBadRequest},
		{"/v1/ports?conductor_groups=,,", "1.99", http.StatusBadRequest},
		{"/v1/ports?shard=" + manyShards, "1.99", http.StatusBadRequest},
	} {
		code, out := call(t, srv, "GET", c.path, c.version, "")
		if code != c.want {
			t.Errorf("GET %s at %s: %d %v, want %d", c.path, c.version, code, out, c.want)
		}
	}

	// Node 2 joins rack-a: its port and port group follow it.
	mustCall(t, srv, 200, "PATCH", "/v1/nodes/"+nodes[2], "latest", `[{"op":"add","path":"/conductor_group","value":"rack-a"}]`)
	if got, want := listed("/v1/ports?conductor_groups=rack-a", "1.99", "ports", "address"), []string{mac(0), mac(2)}; !slices.Equal(got, want) {
		t.Errorf("after the move: %v, want %v", got, want)
	}
	if got, want := listed("/v1/portgroups?conductor_groups=rack-a", "1.99", "portgroups", "name"), []string{"pg0", "pg2"}; !slices.Equal(got, want) {
		t.Errorf("port groups after the move: %v, want %v", got, want)
	}
	// Paging keeps the filter.
	page := mustCall(t, srv, 200, "GET", "/v1/ports?conductor_groups=rack-a&limit=1", "1.99", "")
	next, _ := page["next"].(string)
	if !strings.Contains(next, "conductor_groups=rack-a") {
		t.Fatalf("next link %q lost the filter", next)
	}
	rest := mustCall(t, srv, 200, "GET", strings.TrimPrefix(next, srv.URL), "1.99", "")["ports"].([]any)
	if len(rest) != 1 || rest[0].(map[string]any)["address"] != mac(2) {
		t.Errorf("second page: %v", rest)
	}
}

// TestPortgroupDynamicField: dynamic_portgroup (1.111) is shown, false,
// from its microversion and is not for clients to set.
func TestPortgroupDynamicField(t *testing.T) {
	srv := chassisServer(t)
	node := mustCall(t, srv, 201, "POST", "/v1/nodes", "1.95", `{"driver":"fake-hardware"}`)["uuid"].(string)
	pg := mustCall(t, srv, 201, "POST", "/v1/portgroups", "1.111", `{"node_uuid":"`+node+`","name":"bond0"}`)
	if v, ok := pg["dynamic_portgroup"]; !ok || v != false {
		t.Errorf("created at 1.111: dynamic_portgroup %v (shown %v)", v, ok)
	}
	if _, ok := mustCall(t, srv, 200, "GET", "/v1/portgroups/bond0", "1.110", "")["dynamic_portgroup"]; ok {
		t.Error("shown at 1.110")
	}
	if code, _ := call(t, srv, "GET", "/v1/portgroups/bond0?fields=dynamic_portgroup", "1.110", ""); code != http.StatusNotAcceptable {
		t.Errorf("?fields= at 1.110: %d, want 406", code)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/portgroups", `{"node_uuid":"` + node + `","dynamic_portgroup":true}`},
		{"PATCH", "/v1/portgroups/bond0", `[{"op":"replace","path":"/dynamic_portgroup","value":true}]`},
	} {
		if code, _ := call(t, srv, c.method, c.path, "1.111", c.body); code != http.StatusBadRequest {
			t.Errorf("%s %s setting dynamic_portgroup: %d, want 400", c.method, c.path, code)
		}
	}
}

// TestPortDescriptionContains: ports listed by a substring of their
// description (1.97), alone or with a node, 406 below 1.97.
func TestPortDescriptionContains(t *testing.T) {
	srv := chassisServer(t)
	node := mustCall(t, srv, 201, "POST", "/v1/nodes", "1.95", `{"driver":"fake-hardware","name":"d1"}`)["uuid"].(string)
	for i, d := range []string{"Uplink to TOR-1", "BMC port", "uplink to tor-2"} {
		mustCall(t, srv, 201, "POST", "/v1/ports", "1.97", fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:00:00:51:0%d","description":%q}`, node, i, d))
	}
	for query, want := range map[string]int{"description_contains=uplink": 2, "description_contains=TOR-2&node=d1": 1, "description_contains=nothing": 0} {
		got := mustCall(t, srv, 200, "GET", "/v1/ports?"+query, "1.97", "")["ports"].([]any)
		if len(got) != want {
			t.Errorf("?%s: %d ports, want %d", query, len(got), want)
		}
	}
	if code, _ := call(t, srv, "GET", "/v1/ports?description_contains=uplink", "1.96", ""); code != http.StatusNotAcceptable {
		t.Errorf("below 1.97: %d, want 406", code)
	}
	if code, _ := call(t, srv, "GET", "/v1/ports?description_contains="+strings.Repeat("x", 256), "1.97", ""); code != http.StatusBadRequest {
		t.Errorf("a 256-character filter: %d, want 400", code)
	}
}
