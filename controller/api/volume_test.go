package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// volumeNode creates node name with the API reference samples' UUID and
// the given power state.
func volumeNode(t *testing.T, srv interface{ Close() }, st store.Store, call func(string, string, string) (int, map[string]any), uuid, name string, power proto.PowerState) {
	t.Helper()
	if code, b := call("POST", "/v1/nodes", `{"driver":"fake-hardware","name":"`+name+`","uuid":"`+uuid+`"}`); code != 201 {
		t.Fatalf("node: %d %v", code, b)
	}
	if _, err := st.UpdateNode(context.Background(), uuid, func(n *proto.Node) error {
		n.PowerState = &power
		n.ProvisionState = proto.StateAvailable
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestVolumeMatchesAPIReference drives connectors and targets with the
// API reference's requests and compares every answer's shape with its
// samples, the node's volume views included.
func TestVolumeMatchesAPIReference(t *testing.T) {
	srv, st := stepsServer(t)
	do := func(method, path, body string) (int, map[string]any) { return call(t, srv, method, path, "1.32", body) }
	const node = "6d85703a-565d-469a-96ce-30b6de53079d" // the samples' node
	volumeNode(t, srv, st, do, node, "n1", proto.PowerOff)
	code, conn := do("POST", "/v1/volume/connectors", apiRefSample(t, "volume-connector-create-request.json"))
	if code != http.StatusCreated {
		t.Fatalf("connector: %d %v", code, conn)
	}
	sameShape(t, "connector create", apiRefJSON(t, "volume-connector-create-response.json"), conn)
	code, tgt := do("POST", "/v1/volume/targets", apiRefSample(t, "volume-target-create-request.json"))
	if code != http.StatusCreated {
		t.Fatalf("target: %d %v", code, tgt)
	}
	sameShape(t, "target create", apiRefJSON(t, "volume-target-create-response.json"), tgt)
	getShapes(t, srv, "1.95", []shapeCase{ // detail needs 1.43
		{"/v1/volume", "volume-list-response.json"},
		{"/v1/volume/connectors", "volume-connector-list-response.json"},
		{"/v1/volume/connectors?detail=True", "volume-connector-list-detail-response.json"},
		{"/v1/volume/targets", "volume-target-list-response.json"},
		{"/v1/volume/targets/detail", "volume-target-list-detail-response.json"},
		{"/v1/nodes/n1/volume", "node-volume-list-response.json"},
		{"/v1/nodes/n1/volume/connectors", "node-volume-connector-list-response.json"},
		{"/v1/nodes/n1/volume/connectors?detail=True", "node-volume-connector-detail-response.json"},
		{"/v1/nodes/" + node + "/volume/targets", "node-volume-target-list-response.json"},
		{"/v1/nodes/n1/volume/targets?detail=True", "node-volume-target-detail-response.json"},
		{"/v1/volume/connectors/" + conn["uuid"].(string), "volume-connector-create-response.json"},
	})
	code, got := do("PATCH", "/v1/volume/connectors/"+conn["uuid"].(string), apiRefSample(t, "volume-connector-update-request.json"))
	if code != http.StatusOK || got["connector_id"] != "iqn.2017-07.org.openstack:02:10190a4153e" {
		t.Fatalf("connector patch: %d %v", code, got)
	}
	sameShape(t, "connector patch", apiRefJSON(t, "volume-connector-update-response.json"), got)
	code, got = do("PATCH", "/v1/volume/targets/"+tgt["uuid"].(string), apiRefSample(t, "volume-target-update-request.json"))
	if code != http.StatusOK || got["volume_id"] != "7211f7d3-3f32-4efc-b64e-9b8e92e64a8e" {
		t.Fatalf("target patch: %d %v", code, got)
	}
	sameShape(t, "target patch", apiRefJSON(t, "volume-target-update-response.json"), got)
}

// TestVolumeRules: uniqueness, node association, the powered-on rule,
// filters, gating and errors, each in Ironic's format; refusals change
// nothing.
func TestVolumeRules(t *testing.T) {
	srv, st := stepsServer(t)
	do := func(method, path, body string) (int, map[string]any) { return call(t, srv, method, path, "1.95", body) }
	const off, on = "11111111-0000-4000-8000-000000000001", "11111111-0000-4000-8000-000000000002"
	volumeNode(t, srv, st, do, off, "off", proto.PowerOff)
	volumeNode(t, srv, st, do, on, "on", proto.PowerOn)
	mk := func(path, body string) string {
		t.Helper()
		code, b := do("POST", path, body)
		if code != http.StatusCreated {
			t.Fatalf("POST %s: %d %v", path, code, b)
		}
		return b["uuid"].(string)
	}
	cOff := mk("/v1/volume/connectors", `{"node_uuid":"`+off+`","type":"iqn","connector_id":"iqn.a"}`)
	cOn := mk("/v1/volume/connectors", `{"node_uuid":"`+on+`","type":"iqn","connector_id":"iqn.b"}`)
	tOn := mk("/v1/volume/targets", `{"node_uuid":"`+on+`","volume_type":"iscsi","volume_id":"v1","boot_index":0,"properties":{"target_lun":0}}`)
	mk("/v1/volume/targets", `{"node_uuid":"`+off+`","volume_type":"iscsi","volume_id":"v1","boot_index":0}`)
	for _, c := range []struct {
		name, method, path, version, body string
		code                              int
		fault                             string
	}{
		{"below 1.32", "GET", "/v1/volume/connectors", "1.31", "", 404, "The resource could not be found."},
		{"root below 1.32", "GET", "/v1/volume", "1.31", "", 404, "could not be found"},
		{"create below 1.32", "POST", "/v1/volume/targets", "1.31", `{}`, 404, "could not be found"},
		{"duplicate type and connector_id", "POST", "/v1/volume/connectors", "1.95", `{"node_uuid":"` + off + `","type":"iqn","connector_id":"iqn.b"}`, 409, "A volume connector with type iqn and connector ID iqn.b already exists."},
		{"duplicate boot index", "POST", "/v1/volume/targets", "1.95", `{"node_uuid":"` + on + `","volume_type":"iscsi","volume_id":"v2","boot_index":0}`, 409, "A volume target with boot index '0' for the same node already exists."},
		{"unknown node", "POST", "/v1/volume/connectors", "1.95", `{"node_uuid":"11111111-0000-4000-8000-00000000dead","type":"iqn","connector_id":"iqn.c"}`, 400, "Invalid input for field/attribute node_uuid. Value: '11111111-0000-4000-8000-00000000dead'."},
		{"node by name", "POST", "/v1/volume/connectors", "1.95", `{"node_uuid":"off","type":"iqn","connector_id":"iqn.c"}`, 400, "Expected a UUID for node_uuid, but received off."},
		{"no node", "POST", "/v1/volume/connectors", "1.95", `{"type":"iqn","connector_id":"iqn.c"}`, 400, "'node_uuid' is a required property"},
		{"boot_index not an integer", "POST", "/v1/volume/targets", "1.95", `{"node_uuid":"` + off + `","volume_type":"iscsi","volume_id":"v2","boot_index":"1"}`, 400, "boot_index"},
		{"type too long", "POST", "/v1/volume/connectors", "1.95", `{"node_uuid":"` + off + `","type":"` + strings.Repeat("t", 33) + `","connector_id":"x"}`, 400, "too long"},
		{"patch on a powered-on node", "PATCH", "/v1/volume/connectors/" + cOn, "1.95", `[{"op":"add","path":"/extra/a","value":1}]`, 400, `The requested action "volume connector update" can not be performed on node "` + on + `" while it is in state "power on".`},
		{"move onto a powered-on node", "PATCH", "/v1/volume/connectors/" + cOff, "1.95", `[{"op":"replace","path":"/node_uuid","value":"` + on + `"}]`, 400, `"volume connector update" can not be performed on node "` + on + `"`},
		{"delete on a powered-on node", "DELETE", "/v1/volume/targets/" + tOn, "1.95", "", 400, `The requested action "volume target deletion" can not be performed on node "` + on + `" while it is in state "power on".`},
		{"remove node_uuid", "PATCH", "/v1/volume/connectors/" + cOff, "1.95", `[{"op":"remove","path":"/node_uuid"}]`, 400, "node_uuid"},
		{"patch uuid", "PATCH", "/v1/volume/connectors/" + cOff, "1.95", `[{"op":"replace","path":"/uuid","value":"` + on + `"}]`, 400, "Cannot patch /uuid"},
		{"not a UUID", "GET", "/v1/volume/connectors/iqn.a", "1.95", "", 400, "Expected a UUID but received iqn.a."},
		{"unknown connector", "GET", "/v1/volume/connectors/" + off, "1.95", "", 404, "Volume connector " + off + " could not be found."},
		{"filter on an unknown node", "GET", "/v1/volume/targets?node=nope", "1.95", "", 404, "Node nope could not be found."},
		{"node's volume of an unknown node", "GET", "/v1/nodes/nope/volume/targets", "1.95", "", 404, "Node nope could not be found."},
		{"one connector under a node", "GET", "/v1/nodes/off/volume/connectors/" + cOff, "1.95", "", 400, "Malformed request URI."},
		{"create under a node", "POST", "/v1/nodes/off/volume/connectors", "1.95", `{}`, 400, "Malformed request URI."},
		{"sort by extra", "GET", "/v1/volume/connectors?sort_key=extra", "1.95", "", 400, "invalid field for sorting"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, srv, c.method, c.path, c.version, c.body)
			if code != c.code {
				t.Fatalf("status %d, want %d: %v", code, c.code, body)
			}
			if f := ironicFault(t, body); !strings.Contains(f, c.fault) {
				t.Errorf("faultstring %q, want it to contain %q", f, c.fault)
			}
		})
	}
	// Filters: by node (UUID or name) and under the node.
	for _, path := range []string{"/v1/volume/connectors?node=on", "/v1/volume/connectors?node=" + on, "/v1/nodes/on/volume/connectors"} {
		code, got := do("GET", path, "")
		list, _ := got["connectors"].([]any)
		if code != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["uuid"] != cOn {
			t.Errorf("GET %s: %d %v", path, code, got)
		}
	}
	// A powered-on node in manageable may still lose its volume; a locked
	// node answers 409.
	if _, err := st.UpdateNode(context.Background(), on, func(n *proto.Node) error { n.ProvisionState = proto.StateManageable; return nil }); err != nil {
		t.Fatal(err)
	}
	if code, b := do("DELETE", "/v1/volume/targets/"+tOn, ""); code != http.StatusNoContent {
		t.Errorf("delete in manageable: %d %v", code, b)
	}
	holder := "c9"
	if _, err := st.UpdateNode(context.Background(), off, func(n *proto.Node) error { n.Reservation = &holder; return nil }); err != nil {
		t.Fatal(err)
	}
	if code, b := do("DELETE", "/v1/volume/connectors/"+cOff, ""); code != http.StatusConflict || !strings.Contains(ironicFault(t, b), "is locked by host c9") {
		t.Errorf("delete on a locked node: %d %v", code, b)
	}
	if _, err := st.UpdateNode(context.Background(), off, func(n *proto.Node) error { n.Reservation = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	// Powered off: a patch changes the connector, then deleting the node
	// takes its volume with it.
	code, got := do("PATCH", "/v1/volume/connectors/"+cOff, `[{"op":"replace","path":"/connector_id","value":"iqn.z"},{"op":"add","path":"/extra/k","value":"v"}]`)
	if code != http.StatusOK || got["connector_id"] != "iqn.z" || got["updated_at"] == nil {
		t.Errorf("patch: %d %v", code, got)
	}
	if code, b := do("DELETE", "/v1/nodes/off", ""); code != http.StatusNoContent {
		t.Fatalf("node delete: %d %v", code, b)
	}
	code, got = do("GET", "/v1/volume/connectors", "")
	if list := got["connectors"].([]any); code != http.StatusOK || len(list) != 1 || fmt.Sprint(list[0].(map[string]any)["uuid"]) != cOn {
		t.Errorf("after the node's delete: %d %v", code, got)
	}
	code, got = do("GET", "/v1/volume/targets", "")
	if list := got["targets"].([]any); code != http.StatusOK || len(list) != 0 {
		t.Errorf("targets after the node's delete: %d %v", code, got)
	}
}
