package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/proto"
)

// pgNode creates a fake-hardware node named name and returns its UUID.
func pgNode(t *testing.T, srv *httptest.Server, name string) string {
	t.Helper()
	code, n := call(t, srv, "POST", "/v1/nodes", "1.95", `{"driver":"fake-hardware","name":"`+name+`"}`)
	if code != http.StatusCreated {
		t.Fatalf("node %s: %d %v", name, code, n)
	}
	return n["uuid"].(string)
}

// mustCall is call that fails the test unless the status is want.
func mustCall(t *testing.T, srv *httptest.Server, want int, method, path, version, body string) map[string]any {
	t.Helper()
	code, out := call(t, srv, method, path, version, body)
	if code != want {
		t.Fatalf("%s %s: %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

// shownAtMax drops from an API-reference sample the keys of fields newer
// than the microversions Kiln serves: those it hides, as Ironic would at
// that version.
func shownAtMax(sample map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range sample {
		if min, ok := proto.PortgroupFieldMinVersion[k]; ok && min > api.MaxMinor {
			continue
		}
		out[k] = v
	}
	// The reference's full samples (with 1.103's category) predate
	// 1.111's dynamic_portgroup.
	if _, ok := out["category"]; ok && api.MaxMinor >= 111 {
		out["dynamic_portgroup"] = false
	}
	return out
}

// TestPortgroupsMatchAPIReference creates, lists, shows and updates a port
// group with the API reference's requests and compares each answer's shape
// with the reference's response, at the newest microversion.
func TestPortgroupsMatchAPIReference(t *testing.T) {
	srv := chassisServer(t)
	// The sample's node, so that the request is the reference's unchanged.
	var req map[string]any
	json.Unmarshal([]byte(apiRefSample(t, "portgroup-create-request.json")), &req)
	node := req["node_uuid"].(string)
	mustCall(t, srv, 201, "POST", "/v1/nodes", "1.95", `{"driver":"fake-hardware","uuid":"`+node+`"}`)
	created := mustCall(t, srv, 201, "POST", "/v1/portgroups", "latest", apiRefSample(t, "portgroup-create-request.json"))
	sameShape(t, "create", shownAtMax(apiRefJSON(t, "portgroup-create-response.json")), created)
	if created["name"] != "test_portgroup" || created["address"] != "11:11:11:11:11:11" || created["mode"] != "active-backup" ||
		created["standalone_ports_supported"] != true || created["node_uuid"] != node {
		t.Errorf("created = %v", created)
	}
	id := created["uuid"].(string)
	wantPorts := fmt.Sprint([]any{
		map[string]any{"href": srv.URL + "/v1/portgroups/" + id + "/ports", "rel": "self"},
		map[string]any{"href": srv.URL + "/portgroups/" + id + "/ports", "rel": "bookmark"},
	})
	if fmt.Sprint(created["ports"]) != wantPorts {
		t.Errorf("ports links = %v, want %v", created["ports"], wantPorts)
	}
	mustCall(t, srv, 201, "POST", "/v1/ports", "latest", `{"node_uuid":"`+node+`","address":"22:22:22:22:22:22","portgroup_uuid":"`+id+`"}`)
	listShape := func(name string) map[string]any {
		s := apiRefJSON(t, name)
		for _, key := range []string{"portgroups"} {
			if items, ok := s[key].([]any); ok {
				for i, it := range items {
					items[i] = shownAtMax(it.(map[string]any))
				}
			}
		}
		return s
	}
	for _, c := range []struct{ path, sample string }{
		{"/v1/portgroups/" + id, "portgroup-create-response.json"},
		{"/v1/portgroups/test_portgroup", "portgroup-create-response.json"},
		{"/v1/portgroups", "portgroup-list-response.json"},
		{"/v1/portgroups/detail", "portgroup-list-detail-response.json"},
		{"/v1/portgroups?detail=true", "portgroup-list-detail-response.json"},
		{"/v1/nodes/" + node + "/portgroups", "node-portgroup-list-response.json"},
		{"/v1/nodes/" + node + "/portgroups/detail", "node-portgroup-detail-response.json"},
		{"/v1/portgroups/" + id + "/ports", "portgroup-port-list-response.json"},
	} {
		// The node's port group samples predate physical_network and
		// category (1.102, 1.103): they are compared at 1.101.
		version := "latest"
		if strings.HasPrefix(c.path, "/v1/nodes/") {
			version = "1.101"
		}
		got := mustCall(t, srv, 200, "GET", c.path, version, "")
		want := listShape(c.sample)
		if strings.HasSuffix(c.path, id) || strings.HasSuffix(c.path, "test_portgroup") {
			want = shownAtMax(want)
		}
		sameShape(t, c.path, want, got)
	}
	// The port's detail carries its group.
	ports := mustCall(t, srv, 200, "GET", "/v1/portgroups/test_portgroup/ports/detail", "latest", "")["ports"].([]any)
	if len(ports) != 1 || ports[0].(map[string]any)["portgroup_uuid"] != id {
		t.Errorf("ports of the group, detailed: %v", ports)
	}
	patched := mustCall(t, srv, 200, "PATCH", "/v1/portgroups/"+id, "latest", apiRefSample(t, "portgroup-update-request.json"))
	sameShape(t, "patch", shownAtMax(apiRefJSON(t, "portgroup-update-response.json")), patched)
	if patched["address"] != "22:22:22:22:22:22" || patched["updated_at"] == nil || patched["created_at"] != created["created_at"] {
		t.Errorf("patched = %v", patched)
	}
}

// TestPortgroupsRules: Ironic's membership rules for ports, the delete and
// move rules of groups, uniqueness, and errors in Ironic's format that
// change nothing.
func TestPortgroupsRules(t *testing.T) {
	srv := chassisServer(t)
	n1, n2 := pgNode(t, srv, "n1"), pgNode(t, srv, "n2")
	pg := mustCall(t, srv, 201, "POST", "/v1/portgroups", "1.95", `{"node_uuid":"`+n1+`","name":"bond0","address":"52:54:00:AA:00:01","mode":"802.3ad","properties":{"miimon":"100"}}`)
	id := pg["uuid"].(string)
	strict := mustCall(t, srv, 201, "POST", "/v1/portgroups", "1.95", `{"node_uuid":"`+n1+`","name":"strict","standalone_ports_supported":false}`)
	sid := strict["uuid"].(string)
	p1 := mustCall(t, srv, 201, "POST", "/v1/ports", "1.95", `{"node_uuid":"`+n1+`","address":"52:54:00:00:00:01","portgroup_uuid":"`+id+`","physical_network":"physnet1"}`)
	if p1["portgroup_uuid"] != id {
		t.Fatalf("port in the group: %v", p1)
	}
	const unknown = "0b2c6bbf-0000-4000-8000-000000000000"
	for _, c := range []struct {
		name, method, path, version, body string
		code                              int
		fault                             string
	}{
		{"before 1.23", "GET", "/v1/portgroups", "1.22", "", 404, "could not be found"},
		{"mode before 1.26", "POST", "/v1/portgroups", "1.25", `{"node_uuid":"` + n1 + `","mode":"802.3ad"}`, 406, "not acceptable"},
		{"fields=mode before 1.26", "GET", "/v1/portgroups?fields=mode", "1.25", "", 406, "not acceptable"},
		{"patch mode before 1.26", "PATCH", "/v1/portgroups/bond0", "1.25", `[{"op":"replace","path":"/mode","value":"x"}]`, 406, "not acceptable"},
		{"ports of a group before 1.24", "GET", "/v1/portgroups/" + id + "/ports", "1.23", "", 404, "could not be found"},
		{"groups of a node before 1.24", "GET", "/v1/nodes/n1/portgroups", "1.23", "", 404, "could not be found"},
		{"portgroup filter before 1.24", "GET", "/v1/ports?portgroup=bond0", "1.23", "", 406, "not acceptable"},
		{"portgroup_uuid before 1.24", "POST", "/v1/ports", "1.23", `{"node_uuid":"` + n1 + `","address":"52:54:00:00:00:09","portgroup_uuid":"` + id + `"}`, 406, "not acceptable"},
		{"no node", "POST", "/v1/portgroups", "1.95", `{"name":"x"}`, 400, "'node_uuid' is a required property"},
		{"unknown node", "POST", "/v1/portgroups", "1.95", `{"node_uuid":"` + unknown + `"}`, 400, "Node " + unknown + " could not be found."},
		{"bad MAC", "POST", "/v1/portgroups", "1.95", `{"node_uuid":"` + n1 + `","address":"nope"}`, 400, "Expected a MAC address but received nope."},
		{"bad name", "POST", "/v1/portgroups", "1.95", `{"node_uuid":"` + n1 + `","name":"a b"}`, 400, "Cannot create portgroup with invalid name 'a b'"},
		{"duplicate name", "POST", "/v1/portgroups", "1.95", `{"node_uuid":"` + n1 + `","name":"bond0"}`, 409, "A portgroup with name bond0 already exists."},
		{"duplicate address", "POST", "/v1/portgroups", "1.95", `{"node_uuid":"` + n2 + `","address":"52:54:00:aa:00:01"}`, 409, "A portgroup with MAC address 52:54:00:aa:00:01 already exists."},
		{"duplicate UUID", "POST", "/v1/portgroups", "1.95", `{"node_uuid":"` + n1 + `","uuid":"` + id + `"}`, 409, "A portgroup with UUID " + id + " already exists."},
		{"unknown field", "POST", "/v1/portgroups", "1.95", `{"node_uuid":"` + n1 + `","speed":1}`, 400, "'speed' was unexpected"},
		{"unknown group", "GET", "/v1/portgroups/" + unknown, "1.95", "", 404, "Portgroup " + unknown + " could not be found."},
		{"unknown name", "GET", "/v1/portgroups/bond9", "1.95", "", 404, "Portgroup bond9 could not be found."},
		{"bad ident", "GET", "/v1/portgroups/a%20b", "1.95", "", 400, "Expected a logical name or UUID but received a b."},
		{"delete with ports", "DELETE", "/v1/portgroups/bond0", "1.95", "", 400, "Cannot complete the requested action because portgroup " + id + " contains ports."},
		{"node and address", "GET", "/v1/portgroups?node=n1&address=52:54:00:aa:00:01", "1.95", "", 400, "Filtering by node, address, or shard simultaneously is not supported."},
		{"unknown node filter", "GET", "/v1/portgroups?node=n9", "1.95", "", 404, "Node n9 could not be found."},
		{"bad sort key", "GET", "/v1/portgroups?sort_key=properties", "1.95", "", 400, "invalid field for sorting"},
		{"port in a group of another node", "POST", "/v1/ports", "1.95", `{"node_uuid":"` + n2 + `","address":"52:54:00:00:00:02","portgroup_uuid":"` + id + `"}`, 400, "Port can not be added to a portgroup belonging to a different node."},
		{"port in an unknown group", "POST", "/v1/ports", "1.95", `{"node_uuid":"` + n1 + `","address":"52:54:00:00:00:02","portgroup_uuid":"` + unknown + `"}`, 400, "Portgroup " + unknown + " could not be found."},
		{"port group not a UUID", "POST", "/v1/ports", "1.95", `{"node_uuid":"` + n1 + `","address":"52:54:00:00:00:02","portgroup_uuid":"bond0"}`, 400, "Expected UUID for portgroup_uuid: bond0"},
		{"PXE port in a strict group", "POST", "/v1/ports", "1.95", `{"node_uuid":"` + n1 + `","address":"52:54:00:00:00:02","portgroup_uuid":"` + sid + `"}`, 409, "doesn't support standalone ports"},
		{"port on another physical network", "POST", "/v1/ports", "1.95", `{"node_uuid":"` + n1 + `","address":"52:54:00:00:00:02","portgroup_uuid":"` + id + `","physical_network":"physnet2"}`, 409,
			"Port with physical network physnet2 cannot become a member of port group " + id + " which has ports in physical network physnet1."},
		{"port without a physical network", "POST", "/v1/ports", "1.95", `{"node_uuid":"` + n1 + `","address":"52:54:00:00:00:02","portgroup_uuid":"` + id + `"}`, 409, "Port with physical network None cannot"},
		{"member moved to another node", "PATCH", "/v1/ports/" + p1["uuid"].(string), "1.95", `[{"op":"replace","path":"/node_uuid","value":"` + n2 + `"}]`, 400,
			"Port can not be added to a portgroup belonging to a different node."},
		{"group with ports moved", "PATCH", "/v1/portgroups/bond0", "1.95", `[{"op":"replace","path":"/node_uuid","value":"` + n2 + `"}]`, 400, "because there are ports associated with this portgroup"},
		{"remove mode", "PATCH", "/v1/portgroups/bond0", "1.95", `[{"op":"remove","path":"/mode"}]`, 400, "mode"},
		{"patch internal_info", "PATCH", "/v1/portgroups/bond0", "1.95", `[{"op":"add","path":"/internal_info/x","value":"y"}]`, 400, "Cannot patch /internal_info/x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, srv, c.method, c.path, c.version, c.body)
			if code != c.code {
				t.Fatalf("status %d, want %d: %v", code, c.code, body)
			}
			if f := ironicFault(t, body); !strings.Contains(strings.ToLower(f), strings.ToLower(c.fault)) {
				t.Errorf("faultstring %q, want it to contain %q", f, c.fault)
			}
		})
	}
	// Nothing changed: two groups, one port, as made.
	groups := mustCall(t, srv, 200, "GET", "/v1/portgroups/detail", "1.95", "")["portgroups"].([]any)
	if len(groups) != 2 || groups[0].(map[string]any)["updated_at"] != nil || groups[0].(map[string]any)["node_uuid"] != n1 {
		t.Errorf("after the refusals: %v", groups)
	}
	if ports := mustCall(t, srv, 200, "GET", "/v1/ports?portgroup=bond0", "1.95", "")["ports"].([]any); len(ports) != 1 {
		t.Errorf("ports of bond0 after the refusals: %v", ports)
	}
	// Hidden below their microversions; mode and properties shown from 1.26.
	old := mustCall(t, srv, 200, "GET", "/v1/portgroups/bond0", "1.25", "")
	if _, ok := old["mode"]; ok {
		t.Errorf("mode shown at 1.25: %v", old)
	}
	if _, ok := old["properties"]; ok {
		t.Errorf("properties shown at 1.25: %v", old)
	}
	if got := mustCall(t, srv, 200, "GET", "/v1/portgroups/bond0", "1.26", ""); got["mode"] != "802.3ad" || fmt.Sprint(got["properties"]) != "map[miimon:100]" {
		t.Errorf("at 1.26: %v", got)
	}
	if port := mustCall(t, srv, 200, "GET", "/v1/ports/"+p1["uuid"].(string), "1.23", ""); port["portgroup_uuid"] != nil {
		t.Errorf("portgroup_uuid shown at 1.23: %v", port)
	}
	// A PXE-booting member keeps a group supporting standalone ports.
	if code, body := call(t, srv, "PATCH", "/v1/portgroups/bond0", "1.95", `[{"op":"replace","path":"/standalone_ports_supported","value":false}]`); code != 409 ||
		!strings.Contains(ironicFault(t, body), "contains port with 'pxe_enabled' is set to True") {
		t.Errorf("standalone off with a PXE member: %d %v", code, body)
	}
	// A second member on the same network; a port leaves its group by
	// removing portgroup_uuid; an empty group is deleted and can move.
	p2 := mustCall(t, srv, 201, "POST", "/v1/ports", "1.95", `{"node_uuid":"`+n1+`","address":"52:54:00:00:00:03","portgroup_uuid":"`+id+`","physical_network":"physnet1","pxe_enabled":false}`)
	if got := pgNames(t, srv, "/v1/portgroups/"+id+"/ports", "ports", "address"); !slices.Equal(got, []string{"52:54:00:00:00:01", "52:54:00:00:00:03"}) {
		t.Errorf("members: %v", got)
	}
	for _, p := range []string{p1["uuid"].(string), p2["uuid"].(string)} {
		if got := mustCall(t, srv, 200, "PATCH", "/v1/ports/"+p, "1.95", `[{"op":"remove","path":"/portgroup_uuid"}]`); got["portgroup_uuid"] != nil {
			t.Errorf("port left the group: %v", got)
		}
	}
	mustCall(t, srv, 200, "PATCH", "/v1/portgroups/bond0", "1.95", `[{"op":"replace","path":"/standalone_ports_supported","value":false}]`)
	moved := mustCall(t, srv, 200, "PATCH", "/v1/portgroups/bond0", "1.95", `[{"op":"replace","path":"/node_uuid","value":"`+n2+`"}]`)
	if moved["node_uuid"] != n2 {
		t.Errorf("moved: %v", moved)
	}
	if got := pgNames(t, srv, "/v1/nodes/n2/portgroups", "portgroups", "name"); !slices.Equal(got, []string{"bond0"}) {
		t.Errorf("groups of n2: %v", got)
	}
	mustCall(t, srv, 204, "DELETE", "/v1/portgroups/bond0", "1.95", "")
	mustCall(t, srv, 404, "GET", "/v1/portgroups/"+id, "1.95", "")
	// A node's delete takes its groups along.
	mustCall(t, srv, 204, "DELETE", "/v1/nodes/n1", "1.95", "")
	mustCall(t, srv, 404, "GET", "/v1/portgroups/strict", "1.95", "")
}

// names lists the key of each item of a collection.
func pgNames(t *testing.T, srv *httptest.Server, path, coll, key string) []string {
	t.Helper()
	var out []string
	for _, it := range mustCall(t, srv, 200, "GET", path, "1.95", "")[coll].([]any) {
		out = append(out, fmt.Sprint(it.(map[string]any)[key]))
	}
	return out
}

// TestPortgroupsPaging pages to the end through next links in each sort
// order, for all groups and a node's.
func TestPortgroupsPaging(t *testing.T) {
	srv := chassisServer(t)
	n1, n2 := pgNode(t, srv, "n1"), pgNode(t, srv, "n2")
	var all, ofN1, byName []string
	for i := range 7 {
		node := n1
		if i%3 == 2 {
			node = n2
		}
		pg := mustCall(t, srv, 201, "POST", "/v1/portgroups", "1.95", fmt.Sprintf(`{"node_uuid":"%s","name":"pg%d","address":"52:54:00:00:01:%02x"}`, node, (i*3)%7, 7-i))
		all = append(all, pg["uuid"].(string))
		if node == n1 {
			ofN1 = append(ofN1, pg["uuid"].(string))
		}
	}
	byName = make([]string, 7)
	for i, id := range all {
		byName[(i*3)%7] = id
	}
	byAddress := slices.Clone(all)
	slices.Reverse(byAddress)
	for _, c := range []struct {
		path string
		want []string
	}{
		{"/v1/portgroups?limit=3", all},
		{"/v1/portgroups?limit=2&sort_key=name", byName},
		{"/v1/portgroups?limit=3&sort_key=name&sort_dir=desc", reversed(byName)},
		{"/v1/portgroups/detail?limit=4&sort_key=address", byAddress},
		{"/v1/portgroups?limit=2&node=n1", ofN1},
		{"/v1/nodes/n1/portgroups?limit=2", ofN1},
		{"/v1/nodes/" + n1 + "/portgroups/detail?limit=1", ofN1},
	} {
		var got []string
		next := c.path
		for pages := 0; next != ""; pages++ {
			if pages > 10 {
				t.Fatalf("%s: no end to the pages", c.path)
			}
			body := mustCall(t, srv, 200, "GET", strings.TrimPrefix(next, srv.URL), "1.95", "")
			for _, pg := range body["portgroups"].([]any) {
				got = append(got, pg.(map[string]any)["uuid"].(string))
			}
			next, _ = body["next"].(string)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.path, got, c.want)
		}
	}
	if got := pgNames(t, srv, "/v1/portgroups?address=52:54:00:00:01:07", "portgroups", "name"); !slices.Equal(got, []string{"pg0"}) {
		t.Errorf("by address: %v", got)
	}
	if got := pgNames(t, srv, "/v1/portgroups?address=52:54:00:00:01:77", "portgroups", "name"); len(got) != 0 {
		t.Errorf("by an unknown address: %v", got)
	}
}

// TestPortgroupsStandaloneStrings: standalone_ports_supported takes the
// strings Ironic takes for a boolean (the OpenStack client sends "True").
func TestPortgroupsStandaloneStrings(t *testing.T) {
	srv := chassisServer(t)
	n := pgNode(t, srv, "n1")
	pg := mustCall(t, srv, 201, "POST", "/v1/portgroups", "1.95", `{"node_uuid":"`+n+`","standalone_ports_supported":"False"}`)
	if pg["standalone_ports_supported"] != false {
		t.Errorf("created from \"False\": %v", pg)
	}
	id := pg["uuid"].(string)
	if got := mustCall(t, srv, 200, "PATCH", "/v1/portgroups/"+id, "1.95", `[{"op":"replace","path":"/standalone_ports_supported","value":"True"}]`); got["standalone_ports_supported"] != true {
		t.Errorf("patched with \"True\": %v", got)
	}
	code, body := call(t, srv, "POST", "/v1/portgroups", "1.95", `{"node_uuid":"`+n+`","standalone_ports_supported":"maybe"}`)
	if code != 400 || !strings.Contains(ironicFault(t, body), "maybe") {
		t.Errorf("\"maybe\": %d %v", code, body)
	}
}
