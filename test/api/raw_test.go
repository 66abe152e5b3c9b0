package api_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"testing"
)

// snapshot returns every node and port as the API shows them in detail.
func snapshot(t *testing.T, k *kiln) (nodes, ports map[string]any) {
	t.Helper()
	code, _, b := k.call("GET", "/v1/nodes/detail", "")
	if code != 200 {
		t.Fatalf("list nodes: %d %s", code, b)
	}
	nodes = map[string]any{}
	for _, n := range mustJSON(t, b)["nodes"].([]any) {
		m := n.(map[string]any)
		nodes[m["uuid"].(string)] = m
	}
	code, _, b = k.call("GET", "/v1/ports/detail", "")
	if code != 200 {
		t.Fatalf("list ports: %d %s", code, b)
	}
	ports = map[string]any{}
	for _, p := range mustJSON(t, b)["ports"].([]any) {
		m := p.(map[string]any)
		ports[m["uuid"].(string)] = m
	}
	return nodes, ports
}

func createNodes(t *testing.T, k *kiln, n int) []string {
	t.Helper()
	var uuids []string
	for i := range n {
		body := fmt.Sprintf(`{"driver":"fake-hardware","name":"node-%d","driver_info":{"ipmi_password":"pw%d"},"properties":{"cpus":%d},"extra":{"i":%d}}`, i, i, i+1, i)
		code, _, b := k.call("POST", "/v1/nodes", body)
		if code != http.StatusCreated {
			t.Fatalf("create node %d: %d %s", i, code, b)
		}
		uuid := mustJSON(t, b)["uuid"].(string)
		uuids = append(uuids, uuid)
		code, _, b = k.call("POST", "/v1/ports", fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:00:ab:%02x:%02x"}`, uuid, i/256, i%256))
		if code != http.StatusCreated {
			t.Fatalf("create port %d: %d %s", i, code, b)
		}
	}
	return uuids
}

func TestRestartKeepsEverything(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "kiln.db")
	k := startKiln(t, db)
	uuids := createNodes(t, k, 20)
	// Some state beyond creation: a provision request, maintenance, a patch.
	if code, _, b := k.call("PUT", "/v1/nodes/"+uuids[0]+"/states/provision", `{"target":"manage"}`); code != 202 {
		t.Fatalf("manage: %d %s", code, b)
	}
	if code, _, b := k.call("PUT", "/v1/nodes/"+uuids[1]+"/maintenance", `{"reason":"fan"}`); code != 202 {
		t.Fatalf("maintenance: %d %s", code, b)
	}
	if code, _, b := k.call("PATCH", "/v1/nodes/"+uuids[2], `[{"op":"add","path":"/instance_info/image_source","value":"http://x/y.img"}]`); code != 200 {
		t.Fatalf("patch: %d %s", code, b)
	}
	// The manage flow runs on after the 202: the snapshot waits for it to
	// end, or the conductor can still change the node between the
	// snapshot and the stop (seen in CI: verifying before, manageable
	// after).
	k.waitNode(t, uuids[0], func(n map[string]any) bool {
		return n["provision_state"] == "manageable" && n["reservation"] == nil
	})
	nodesBefore, portsBefore := snapshot(t, k)
	k.stop()

	k2 := startKiln(t, db)
	nodesAfter, portsAfter := snapshot(t, k2)
	if len(nodesAfter) != 20 || len(portsAfter) != 20 {
		t.Fatalf("after restart: %d nodes, %d ports; want 20 each", len(nodesAfter), len(portsAfter))
	}
	// Links carry the listening address, which changed with the restart.
	stripLinks := func(m map[string]any) {
		for _, v := range m {
			obj := v.(map[string]any)
			for _, k := range []string{"links", "ports", "states", "portgroups", "volume"} {
				delete(obj, k)
			}
		}
	}
	for _, m := range []map[string]any{nodesBefore, nodesAfter, portsBefore, portsAfter} {
		stripLinks(m)
	}
	for uuid, before := range nodesBefore {
		if !reflect.DeepEqual(before, nodesAfter[uuid]) {
			t.Errorf("node %s changed across restart:\nbefore %v\nafter  %v", uuid, before, nodesAfter[uuid])
		}
	}
	if !reflect.DeepEqual(portsBefore, portsAfter) {
		t.Errorf("ports changed across restart")
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	uuids := createNodes(t, k, 3)
	n0 := "/v1/nodes/" + uuids[0]
	nodesBefore, portsBefore := snapshot(t, k)

	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		want                     int
	}{
		{"malformed JSON create", "POST", "/v1/nodes", `{"driver": `, nil, 400},
		{"malformed JSON patch", "PATCH", n0, `[{"op":`, nil, 400},
		{"patch not a list", "PATCH", n0, `{"op":"add"}`, nil, 400},
		{"unknown field", "POST", "/v1/nodes", `{"driver":"fake-hardware","bogus_field":1}`, nil, 400},
		{"wrong type", "POST", "/v1/nodes", `{"driver":"fake-hardware","extra":"not-an-object"}`, nil, 400},
		{"missing driver", "POST", "/v1/nodes", `{"name":"x"}`, nil, 400},
		{"unknown driver", "POST", "/v1/nodes", `{"driver":"nope"}`, nil, 400},
		{"bad name", "POST", "/v1/nodes", `{"driver":"fake-hardware","name":"has space"}`, nil, 400},
		{"duplicate name", "POST", "/v1/nodes", `{"driver":"fake-hardware","name":"node-1"}`, nil, 409},
		{"duplicate uuid", "POST", "/v1/nodes", fmt.Sprintf(`{"driver":"fake-hardware","uuid":%q}`, uuids[1]), nil, 409},
		{"name too new for 1.1", "POST", "/v1/nodes", `{"driver":"fake-hardware","name":"new"}`, []string{"X-OpenStack-Ironic-API-Version", "1.1"}, 406},
		{"patch read-only uuid", "PATCH", n0, `[{"op":"replace","path":"/uuid","value":"x"}]`, nil, 400},
		{"patch read-only state", "PATCH", n0, `[{"op":"replace","path":"/provision_state","value":"active"}]`, nil, 400},
		{"patch driver_internal_info", "PATCH", n0, `[{"op":"add","path":"/driver_internal_info/x","value":1}]`, nil, 400},
		{"patch mixed valid and invalid", "PATCH", n0, `[{"op":"add","path":"/extra/ok","value":1},{"op":"replace","path":"/uuid","value":"x"}]`, nil, 400},
		{"patch remove missing key", "PATCH", n0, `[{"op":"remove","path":"/extra/absent"}]`, nil, 400},
		{"patch to duplicate name", "PATCH", n0, `[{"op":"replace","path":"/name","value":"node-2"}]`, nil, 409},
		{"patch bad interface", "PATCH", n0, `[{"op":"replace","path":"/power_interface","value":"redfish"}]`, nil, 400},
		{"microversion too high", "GET", "/v1/nodes", "", []string{"X-OpenStack-Ironic-API-Version", "1.999"}, 406},
		{"microversion garbage", "GET", "/v1/nodes", "", []string{"X-OpenStack-Ironic-API-Version", "banana"}, 406},
		{"microversion too low", "GET", "/v1/nodes", "", []string{"OpenStack-API-Version", "baremetal 1.0"}, 406},
		{"invalid verb for state", "PUT", n0 + "/states/provision", `{"target":"active"}`, nil, 400},
		{"unknown verb", "PUT", n0 + "/states/provision", `{"target":"explode"}`, nil, 400},
		{"verb too new", "PUT", n0 + "/states/provision", `{"target":"manage"}`, []string{"X-OpenStack-Ironic-API-Version", "1.3"}, 406},
		{"clean without steps", "PUT", n0 + "/states/provision", `{"target":"clean"}`, nil, 400},
		{"bad power target", "PUT", n0 + "/states/power", `{"target":"explode"}`, nil, 400},
		{"bad boot device", "PUT", n0 + "/management/boot_device", `{"boot_device":"floppy"}`, nil, 400},
		{"duplicate MAC", "POST", "/v1/ports", fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:00:ab:00:01"}`, uuids[0]), nil, 409},
		{"duplicate MAC upper case", "POST", "/v1/ports", fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:00:AB:00:01"}`, uuids[2]), nil, 409},
		{"bad MAC", "POST", "/v1/ports", fmt.Sprintf(`{"node_uuid":%q,"address":"zz"}`, uuids[0]), nil, 400},
		{"port for unknown node", "POST", "/v1/ports", `{"node_uuid":"00000000-0000-4000-8000-000000000000","address":"52:54:00:99:99:99"}`, nil, 400},
		{"bad limit", "GET", "/v1/nodes?limit=abc", "", nil, 400},
		{"negative limit", "GET", "/v1/nodes?limit=-1", "", nil, 400},
		{"bad sort key", "GET", "/v1/nodes?sort_key=password", "", nil, 400},
		{"unknown field selector", "GET", "/v1/nodes?fields=uuid,bogus", "", nil, 400},
		{"delete collection", "DELETE", "/v1/nodes", "", nil, 400},
		{"unknown node", "GET", "/v1/nodes/00000000-0000-4000-8000-000000000000", "", nil, 404},
		{"unknown path", "GET", "/v1/no-such-resource", "", nil, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, b := k.call(tc.method, tc.path, tc.body, tc.headers...)
			if code != tc.want {
				t.Fatalf("status %d, want %d: %s", code, tc.want, b)
			}
			if msg := faultstring(t, b); msg == "" && code != 404 {
				t.Errorf("empty error message")
			}
			if hdr.Get("X-OpenStack-Ironic-API-Minimum-Version") != "1.1" || hdr.Get("X-OpenStack-Ironic-API-Maximum-Version") != "1.115" {
				t.Errorf("version headers missing on error: %v", hdr)
			}
		})
	}
	nodesAfter, portsAfter := snapshot(t, k)
	if !reflect.DeepEqual(nodesBefore, nodesAfter) {
		for uuid := range nodesBefore {
			if !reflect.DeepEqual(nodesBefore[uuid], nodesAfter[uuid]) {
				t.Errorf("node %s changed:\nbefore %v\nafter  %v", uuid, nodesBefore[uuid], nodesAfter[uuid])
			}
		}
	}
	if !reflect.DeepEqual(portsBefore, portsAfter) {
		t.Errorf("ports changed by refused requests")
	}
}
