package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
)

func TestConsole(t *testing.T) {
	srv, _ := newNodeAPI(t)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"quiet","console_interface":"no-console"}`)
	code, got := call(t, srv, "GET", "/v1/nodes/n1/states/console", "1.115", "")
	if code != 200 || got["console_enabled"] != false || got["console_info"] != nil {
		t.Fatalf("console before: %d %v", code, got)
	}
	for _, tc := range []struct{ name, body, msg string }{
		{"no enabled", `{}`, "enabled"},
		{"not a boolean", `{"enabled":"maybe"}`, "enabled"},
		{"unknown key", `{"enabled":true,"mode":"vnc"}`, "mode"},
	} {
		if code, body := call(t, srv, "PUT", "/v1/nodes/n1/states/console", "1.115", tc.body); code != 400 || !strings.Contains(faultString(t, body), tc.msg) {
			t.Errorf("%s: %d %v", tc.name, code, body)
		}
	}
	req, _ := http.NewRequest("PUT", srv.URL+"/v1/nodes/n1/states/console", strings.NewReader(`{"enabled":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 || !strings.HasSuffix(resp.Header.Get("Location"), "/v1/nodes/n1/states/console") {
		t.Fatalf("enable: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	code, got = call(t, srv, "GET", "/v1/nodes/n1/states/console", "1.115", "")
	if code != 200 || got["console_enabled"] != true || !equalJSON(got["console_info"], map[string]any{}) {
		t.Fatalf("console after enable: %d %v", code, got)
	}
	if _, n := call(t, srv, "GET", "/v1/nodes/n1", "1.115", ""); n["console_enabled"] != true {
		t.Errorf("node console_enabled %v", n["console_enabled"])
	}
	if code, body := call(t, srv, "PATCH", "/v1/nodes/n1?reset_interfaces=true", "1.115", `[{"op":"replace","path":"/driver","value":"redfish"}]`); code != 409 {
		t.Errorf("driver change with the console on: %d %v, want 409", code, body)
	}
	if code, _ := call(t, srv, "PUT", "/v1/nodes/n1/states/console", "1.115", `{"enabled":false}`); code != 202 {
		t.Errorf("disable: %d", code)
	}
	if _, got = call(t, srv, "GET", "/v1/nodes/n1/states/console", "1.115", ""); got["console_enabled"] != false {
		t.Errorf("console after disable: %v", got)
	}
	for _, m := range []string{"GET", "PUT"} {
		code, body := call(t, srv, m, "/v1/nodes/quiet/states/console", "1.115", `{"enabled":true}`)
		if code != 400 || !strings.Contains(faultString(t, body), "does not support console") {
			t.Errorf("%s console of a no-console node: %d %v", m, code, body)
		}
	}
	if code, _ := call(t, srv, "GET", "/v1/nodes/nope/states/console", "1.115", ""); code != 404 {
		t.Errorf("console of an unknown node: %d", code)
	}
}

func TestTargetRAIDConfig(t *testing.T) {
	srv, _ := newNodeAPI(t)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"noraid","raid_interface":"no-raid"}`)
	sample := apiRefSample(t, "node-set-raid-request.json")
	if code, body := call(t, srv, "PUT", "/v1/nodes/n1/states/raid", "1.12", sample); code != 204 {
		t.Fatalf("PUT Ironic's sample: %d %v", code, body)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(sample), &want); err != nil {
		t.Fatal(err)
	}
	_, n := call(t, srv, "GET", "/v1/nodes/n1", "1.115", "")
	if !equalJSON(n["target_raid_config"], want) {
		t.Fatalf("target_raid_config %v, want %v", n["target_raid_config"], want)
	}
	for _, tc := range []struct {
		name, node, version, body string
		want                      int
	}{
		{"below 1.12", "n1", "1.11", sample, 406},
		{"bad level", "n1", "1.115", `{"logical_disks":[{"raid_level":"42","size_gb":1}]}`, 400},
		{"two roots", "n1", "1.115", `{"logical_disks":[{"raid_level":"1","size_gb":1,"is_root_volume":true},{"raid_level":"1","size_gb":1,"is_root_volume":true}]}`, 400},
		{"not an object", "n1", "1.115", `[1]`, 400},
		{"no-raid interface", "noraid", "1.115", sample, 404},
		{"unknown node", "nope", "1.115", sample, 404},
	} {
		if code, body := call(t, srv, "PUT", "/v1/nodes/"+tc.node+"/states/raid", tc.version, tc.body); code != tc.want || body["error_message"] == nil {
			t.Errorf("%s: %d %v, want %d in Ironic's format", tc.name, code, body, tc.want)
		}
	}
	if _, n = call(t, srv, "GET", "/v1/nodes/n1", "1.115", ""); !equalJSON(n["target_raid_config"], want) {
		t.Errorf("refused requests changed target_raid_config: %v", n["target_raid_config"])
	}
	if code, _ := call(t, srv, "PUT", "/v1/nodes/n1/states/raid", "1.115", `{}`); code != 204 {
		t.Errorf("clear: %d", code)
	}
	if _, n = call(t, srv, "GET", "/v1/nodes/n1/states", "1.115", ""); !equalJSON(n["target_raid_config"], map[string]any{}) {
		t.Errorf("after clearing: %v", n["target_raid_config"])
	}
}

func TestDriverEndpoints(t *testing.T) {
	srv, _ := newNodeAPI(t)
	code, got := call(t, srv, "GET", "/v1/drivers/fake-hardware/raid/logical_disk_properties", "1.115", "")
	if code != 200 {
		t.Fatalf("logical disk properties: %d %v", code, got)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(apiRefSample(t, "driver-logical-disk-properties-response.json")), &want); err != nil {
		t.Fatal(err)
	}
	sameShape(t, "logical_disk_properties", want, got)
	code, got = call(t, srv, "GET", "/v1/drivers/redfish/properties", "1.115", "")
	if code != 200 || got["redfish_address"] == nil || got["deploy_kernel"] == nil {
		t.Fatalf("redfish properties: %d %v", code, got)
	}
	for k, v := range got {
		if _, ok := v.(string); !ok {
			t.Errorf("property %s: %v is not a description", k, v)
		}
	}
	for _, tc := range []struct {
		name, path, version string
		want                int
	}{
		{"raid properties below 1.12", "/v1/drivers/fake-hardware/raid/logical_disk_properties", "1.11", 406},
		{"raid properties of an unknown driver", "/v1/drivers/nope/raid/logical_disk_properties", "1.115", 404},
		{"properties of an unknown driver", "/v1/drivers/nope/properties", "1.115", 404},
		{"detail below 1.30", "/v1/drivers?detail=true", "1.29", 406},
		{"type below 1.30", "/v1/drivers?type=dynamic", "1.29", 406},
		{"bad type", "/v1/drivers?type=modern", "1.115", 400},
		{"method required", "/v1/drivers/fake-hardware/vendor_passthru", "1.115", 400},
		{"no such method", "/v1/drivers/fake-hardware/vendor_passthru?method=reboot_bmc", "1.115", 400},
		{"vendor methods of an unknown driver", "/v1/drivers/nope/vendor_passthru/methods", "1.115", 404},
	} {
		if code, body := call(t, srv, "GET", tc.path, tc.version, ""); code != tc.want || body["error_message"] == nil {
			t.Errorf("%s: %d %v, want %d in Ironic's format", tc.name, code, body, tc.want)
		}
	}
	if code, got := call(t, srv, "GET", "/v1/drivers/fake-hardware/vendor_passthru/methods", "1.115", ""); code != 200 || len(got) != 0 {
		t.Errorf("driver vendor methods: %d %v", code, got)
	}
	_, list := call(t, srv, "GET", "/v1/drivers?detail=true", "1.115", "")
	for _, d := range list["drivers"].([]any) {
		if d.(map[string]any)["default_boot_interface"] == nil {
			t.Errorf("driver in detail without interfaces: %v", d)
		}
	}
	_, list = call(t, srv, "GET", "/v1/drivers?type=classic", "1.115", "")
	if len(list["drivers"].([]any)) != 0 {
		t.Errorf("classic drivers: %v", list)
	}
	_, list = call(t, srv, "GET", "/v1/drivers?type=dynamic", "1.115", "")
	if len(list["drivers"].([]any)) == 0 {
		t.Errorf("no dynamic drivers")
	}
	var sample map[string]any
	if err := json.Unmarshal([]byte(apiRefSample(t, "driver-get-response.json")), &sample); err != nil {
		t.Fatal(err)
	}
	_, one := call(t, srv, "GET", "/v1/drivers/fake-hardware", "1.115", "")
	for k := range sample {
		if k == "enabled_firmware_interface" {
			k += "s" // a typo in the sample: Ironic's driver.py writes enabled_<iface>_interfaces
		}
		if _, ok := one[k]; !ok {
			t.Errorf("driver detail lacks %s of Ironic's sample", k)
		}
	}
}

func TestNodeVendorPassthru(t *testing.T) {
	srv, _ := newNodeAPI(t)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"nov","vendor_interface":"no-vendor"}`)
	if code, got := call(t, srv, "GET", "/v1/nodes/n1/vendor_passthru/methods", "1.115", ""); code != 200 || len(got) != 0 {
		t.Errorf("methods: %d %v, want {}", code, got)
	}
	for _, tc := range []struct{ name, method, path, msg string }{
		{"no method", "POST", "/v1/nodes/n1/vendor_passthru", "Method not specified"},
		{"unknown method", "POST", "/v1/nodes/n1/vendor_passthru?method=bmc_reset", "No handler for method bmc_reset"},
		{"unknown method by GET", "GET", "/v1/nodes/n1/vendor_passthru?method=x", "No handler for method x"},
		{"no-vendor methods", "GET", "/v1/nodes/nov/vendor_passthru/methods", "does not support vendor"},
		{"no-vendor call", "POST", "/v1/nodes/nov/vendor_passthru?method=x", "does not support vendor"},
	} {
		if code, body := call(t, srv, tc.method, tc.path, "1.115", "{}"); code != 400 || !strings.Contains(faultString(t, body), tc.msg) {
			t.Errorf("%s: %d %v, want 400 %q", tc.name, code, body, tc.msg)
		}
	}
	if code, _ := call(t, srv, "GET", "/v1/nodes/nope/vendor_passthru/methods", "1.115", ""); code != 404 {
		t.Errorf("methods of an unknown node: %d", code)
	}
}

func TestConductorShowAndDetail(t *testing.T) {
	srv, st := newNodeAPI(t)
	if err := st.RegisterConductor(context.Background(), store.Conductor{Hostname: "c1", Group: "", Drivers: []string{"fake-hardware", "redfish"}}); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(apiRefSample(t, "conductor-show-response.json")), &want); err != nil {
		t.Fatal(err)
	}
	code, got := call(t, srv, "GET", "/v1/conductors/c1", "1.49", "")
	if code != 200 {
		t.Fatalf("show: %d %v", code, got)
	}
	sameShape(t, "conductor", want, got)
	if !equalJSON(got["drivers"], []any{"fake-hardware", "redfish"}) || got["alive"] != true {
		t.Errorf("conductor: %v", got)
	}
	var wantList map[string]any
	if err := json.Unmarshal([]byte(apiRefSample(t, "conductor-list-details-response.json")), &wantList); err != nil {
		t.Fatal(err)
	}
	_, list := call(t, srv, "GET", "/v1/conductors?detail=true", "1.49", "")
	sameShape(t, "conductors detail", wantList, list)
	if err := json.Unmarshal([]byte(apiRefSample(t, "conductor-list-response.json")), &wantList); err != nil {
		t.Fatal(err)
	}
	_, list = call(t, srv, "GET", "/v1/conductors", "1.49", "")
	sameShape(t, "conductors", wantList, list)
	if code, body := call(t, srv, "GET", "/v1/conductors/nope", "1.49", ""); code != 404 || !strings.Contains(faultString(t, body), "nope") {
		t.Errorf("unknown conductor: %d %v", code, body)
	}
	if code, _ := call(t, srv, "GET", "/v1/conductors/c1", "1.48", ""); code != 404 {
		t.Errorf("conductor at 1.48: %d, want 404", code)
	}
}

func TestUnknownRoutesAnswerInIronicFormat(t *testing.T) {
	srv, _ := newNodeAPI(t)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/no-such-resource", 404},
		{"GET", "/v1/nodes/n1/no-such-thing", 404},
		{"DELETE", "/v1/drivers", 405},
		{"POST", "/v1/nodes/n1/states/console", 405},
		{"DELETE", "/v1/shards", 405},
		{"POST", "/v1/conductors/c1", 405},
	} {
		code, body := call(t, srv, tc.method, tc.path, "1.115", "")
		if code != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, code, tc.want)
			continue
		}
		var inner map[string]any
		if err := json.Unmarshal([]byte(faultString(t, body)), &inner); err != nil || inner["code"] != float64(tc.want) {
			t.Errorf("%s %s: body %v is not Ironic's error format", tc.method, tc.path, body)
		}
	}
}

func TestVendorPassthruMethodInPath(t *testing.T) {
	srv, _ := newNodeAPI(t)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	for _, path := range []string{"/v1/nodes/n1/vendor_passthru/clear_sel", "/v1/drivers/fake-hardware/vendor_passthru/clear_sel"} {
		if code, body := call(t, srv, "POST", path, "1.115", "{}"); code != 400 || !strings.Contains(faultString(t, body), "No handler for method clear_sel") {
			t.Errorf("POST %s: %d %v", path, code, body)
		}
	}
}
