package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
	_ "github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Node fields and rules of microversions 1.96–1.115 (and the 1.82/1.83
// endpoints): each hidden or refused below its version and working at it.

// newNodeAPI is the API on a fresh SQLite store, with the store for
// arranging states no API call can reach.
func newNodeAPI(t *testing.T) (*httptest.Server, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1"}))
	t.Cleanup(srv.Close)
	return srv, st
}

func mustNode(t *testing.T, srv *httptest.Server, body string) map[string]any {
	t.Helper()
	code, n := call(t, srv, "POST", "/v1/nodes", "1.115", body)
	if code != http.StatusCreated {
		t.Fatalf("create %s: %d %v", body, code, n)
	}
	return n
}

func TestNewNodeFieldsGated(t *testing.T) {
	srv, _ := newNodeAPI(t)
	n := mustNode(t, srv, `{"driver":"fake-hardware","name":"n1","instance_name":"web-1"}`)
	if n["instance_name"] != "web-1" || n["health"] != nil {
		t.Fatalf("created node: instance_name %v, health %v", n["instance_name"], n["health"])
	}
	if _, ok := n["health"]; !ok {
		t.Fatal("health missing at 1.115")
	}
	for _, tc := range []struct {
		field   string
		version string
		shown   bool
	}{
		{"instance_name", "1.103", false}, {"instance_name", "1.104", true},
		{"health", "1.108", false}, {"health", "1.109", true},
	} {
		_, got := call(t, srv, "GET", "/v1/nodes/n1", tc.version, "")
		if _, ok := got[tc.field]; ok != tc.shown {
			t.Errorf("GET at %s: %s shown = %v, want %v", tc.version, tc.field, ok, tc.shown)
		}
		code, _ := call(t, srv, "GET", "/v1/nodes/n1?fields=uuid,"+tc.field, tc.version, "")
		if want := map[bool]int{true: 200, false: 406}[tc.shown]; code != want {
			t.Errorf("?fields=%s at %s: %d, want %d", tc.field, tc.version, code, want)
		}
	}
	for _, tc := range []struct {
		name, method, path, version, body string
		want                              int
		msg                               string
	}{
		{"create with instance_name below 1.104", "POST", "/v1/nodes", "1.103", `{"driver":"fake-hardware","instance_name":"x"}`, 406, ""},
		{"patch instance_name below 1.104", "PATCH", "/v1/nodes/n1", "1.103", `[{"op":"replace","path":"/instance_name","value":"x"}]`, 406, ""},
		{"instance_name too long", "POST", "/v1/nodes", "1.115", `{"driver":"fake-hardware","instance_name":"` + strings.Repeat("a", 256) + `"}`, 400, "instance_name"},
		{"instance_name empty", "POST", "/v1/nodes", "1.115", `{"driver":"fake-hardware","instance_name":""}`, 400, "instance_name"},
		{"health is read-only on create", "POST", "/v1/nodes", "1.115", `{"driver":"fake-hardware","health":"OK"}`, 400, "health"},
		{"health is read-only on patch", "PATCH", "/v1/nodes/n1", "1.115", `[{"op":"replace","path":"/health","value":"OK"}]`, 400, "health"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call(t, srv, tc.method, tc.path, tc.version, tc.body)
			if code != tc.want {
				t.Fatalf("%d, want %d: %v", code, tc.want, body)
			}
			if msg := faultString(t, body); !strings.Contains(msg, tc.msg) {
				t.Errorf("faultstring %q does not mention %q", msg, tc.msg)
			}
		})
	}
	_, got := call(t, srv, "GET", "/v1/nodes/n1", "1.115", "")
	if got["instance_name"] != "web-1" || got["health"] != nil {
		t.Errorf("refused requests changed the node: %v %v", got["instance_name"], got["health"])
	}
}

// faultString is the faultstring of an Ironic error body ("" for none).
func faultString(t *testing.T, body map[string]any) string {
	t.Helper()
	s, _ := body["error_message"].(string)
	return s
}

func TestInstanceNameFollowsDisplayName(t *testing.T) {
	srv, _ := newNodeAPI(t)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	code, n := call(t, srv, "PATCH", "/v1/nodes/n1", "1.115", `[{"op":"add","path":"/instance_info/display_name","value":"from-nova"}]`)
	if code != 200 || n["instance_name"] != "from-nova" {
		t.Fatalf("display_name set: %d, instance_name %v", code, n["instance_name"])
	}
	// An instance_name of its own is kept when display_name changes.
	call(t, srv, "PATCH", "/v1/nodes/n1", "1.115", `[{"op":"replace","path":"/instance_name","value":"mine"}]`)
	code, n = call(t, srv, "PATCH", "/v1/nodes/n1", "1.115", `[{"op":"replace","path":"/instance_info/display_name","value":"other"}]`)
	if code != 200 || n["instance_name"] != "mine" {
		t.Fatalf("display_name changed: %d, instance_name %v, want mine", code, n["instance_name"])
	}
	_, list := call(t, srv, "GET", "/v1/nodes?instance_name=mine", "1.115", "")
	if nodes := list["nodes"].([]any); len(nodes) != 1 {
		t.Errorf("?instance_name=mine: %d nodes, want 1", len(nodes))
	}
	_, list = call(t, srv, "GET", "/v1/nodes?instance_name=other", "1.115", "")
	if nodes := list["nodes"].([]any); len(nodes) != 0 {
		t.Errorf("?instance_name=other: %d nodes, want 0", len(nodes))
	}
	if code, _ := call(t, srv, "GET", "/v1/nodes?instance_name=mine", "1.103", ""); code != 406 {
		t.Errorf("?instance_name at 1.103: %d, want 406", code)
	}
}

func names(t *testing.T, list map[string]any) []string {
	t.Helper()
	var out []string
	for _, n := range list["nodes"].([]any) {
		out = append(out, n.(map[string]any)["name"].(string))
	}
	slices.Sort(out)
	return out
}

func TestShardsAndChildren(t *testing.T) {
	srv, _ := newNodeAPI(t)
	for _, b := range []string{
		`{"driver":"fake-hardware","name":"a1","shard":"a"}`,
		`{"driver":"fake-hardware","name":"a2","shard":"a"}`,
		`{"driver":"fake-hardware","name":"b1","shard":"b"}`,
		`{"driver":"fake-hardware","name":"none1"}`,
	} {
		mustNode(t, srv, b)
	}
	parent := mustNode(t, srv, `{"driver":"fake-hardware","name":"parent"}`)
	kid := mustNode(t, srv, `{"driver":"fake-hardware","name":"kid","parent_node":"parent","shard":"a"}`)
	if kid["parent_node"] != parent["uuid"] {
		t.Fatalf("parent_node by name stored as %v, want %v", kid["parent_node"], parent["uuid"])
	}

	code, sh := call(t, srv, "GET", "/v1/shards", "1.115", "")
	want := []any{
		map[string]any{"name": "a", "count": float64(3)},
		map[string]any{"name": "None", "count": float64(2)},
		map[string]any{"name": "b", "count": float64(1)},
	}
	if code != 200 || !equalJSON(sh["shards"], want) {
		t.Errorf("GET /v1/shards: %d %v, want %v", code, sh, want)
	}
	if code, body := call(t, srv, "GET", "/v1/shards", "1.81", ""); code != 404 || body["error_message"] == nil {
		t.Errorf("GET /v1/shards at 1.81: %d %v, want 404 in Ironic's format", code, body)
	}

	for _, tc := range []struct {
		query   string
		version string
		want    []string
	}{
		{"", "1.5", []string{"a1", "a2", "b1", "none1", "parent"}}, // children left out before 1.83 too
		{"", "1.115", []string{"a1", "a2", "b1", "none1", "parent"}},
		{"?include_children=true", "1.83", []string{"a1", "a2", "b1", "kid", "none1", "parent"}},
		{"?parent_node=" + parent["uuid"].(string), "1.83", []string{"kid"}},
		{"?shard=a", "1.82", []string{"a1", "a2"}},
		{"?shard=a,b", "1.82", []string{"a1", "a2", "b1"}},
		{"?shard=a&include_children=true", "1.83", []string{"a1", "a2", "kid"}},
		{"?sharded=false", "1.82", []string{"none1", "parent"}},
		{"?sharded=true", "1.82", []string{"a1", "a2", "b1"}},
	} {
		for _, path := range []string{"/v1/nodes", "/v1/nodes/detail"} {
			code, list := call(t, srv, "GET", path+tc.query, tc.version, "")
			if code != 200 {
				t.Errorf("%s%s: %d %v", path, tc.query, code, list)
				continue
			}
			if got := names(t, list); !slices.Equal(got, tc.want) {
				t.Errorf("%s%s at %s: %v, want %v", path, tc.query, tc.version, got, tc.want)
			}
		}
	}
	for _, tc := range []struct{ query, version string }{
		{"?shard=a", "1.81"}, {"?sharded=true", "1.81"},
		{"?parent_node=x", "1.82"}, {"?include_children=true", "1.82"},
	} {
		if code, body := call(t, srv, "GET", "/v1/nodes"+tc.query, tc.version, ""); code != 406 {
			t.Errorf("%s at %s: %d %v, want 406", tc.query, tc.version, code, body)
		}
	}
	if code, _ := call(t, srv, "GET", "/v1/nodes?shard=a,,b", "1.82", ""); code != 400 {
		t.Errorf("empty shard name: %d, want 400", code)
	}

	code, ch := call(t, srv, "GET", "/v1/nodes/parent/children", "1.83", "")
	if code != 200 || !equalJSON(ch["children"], []any{kid["uuid"]}) {
		t.Fatalf("children: %d %v", code, ch)
	}
	lk := ch["links"].([]any)[0].(map[string]any)["href"].(string)
	if !strings.HasSuffix(lk, "/v1/nodes/?parent_node="+parent["uuid"].(string)) {
		t.Errorf("children link %q", lk)
	}
	if code, ch := call(t, srv, "GET", "/v1/nodes/a1/children", "1.83", ""); code != 200 || !equalJSON(ch["children"], []any{}) {
		t.Errorf("children of a childless node: %d %v", code, ch)
	}
	if code, _ := call(t, srv, "GET", "/v1/nodes/parent/children", "1.82", ""); code != 404 {
		t.Errorf("children at 1.82: %d, want 404", code)
	}
	if code, _ := call(t, srv, "GET", "/v1/nodes/nope/children", "1.83", ""); code != 404 {
		t.Errorf("children of an unknown node: %d, want 404", code)
	}
}

func TestResetInterfaces(t *testing.T) {
	srv, _ := newNodeAPI(t)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	toRedfish := `[{"op":"replace","path":"/driver","value":"redfish"}]`
	for _, tc := range []struct {
		name, query, version, body string
		want                       int
	}{
		{"below 1.45", "?reset_interfaces=true", "1.44", toRedfish, 406},
		{"without a driver change", "?reset_interfaces=true", "1.45", `[{"op":"add","path":"/extra/a","value":"b"}]`, 400},
		{"not a boolean", "?reset_interfaces=maybe", "1.45", toRedfish, 400},
		{"fake interfaces kept for redfish", "", "1.45", toRedfish, 400},
		{"fake interfaces kept when false", "?reset_interfaces=false", "1.45", toRedfish, 400},
	} {
		code, body := call(t, srv, "PATCH", "/v1/nodes/n1"+tc.query, tc.version, tc.body)
		if code != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.name, code, body, tc.want)
		}
	}
	_, n := call(t, srv, "GET", "/v1/nodes/n1", "1.115", "")
	if n["driver"] != "fake-hardware" || n["extra"].(map[string]any)["a"] != nil {
		t.Fatalf("refused patches changed the node: %v %v", n["driver"], n["extra"])
	}
	code, n := call(t, srv, "PATCH", "/v1/nodes/n1?reset_interfaces=true", "1.45", toRedfish)
	if code != 200 || n["driver"] != "redfish" || n["power_interface"] != "redfish" {
		t.Fatalf("reset to redfish: %d driver %v power_interface %v: %v", code, n["driver"], n["power_interface"], n)
	}
	// Interfaces the new type also has are kept without a reset.
	code, n = call(t, srv, "PATCH", "/v1/nodes/n1", "1.86", `[{"op":"replace","path":"/driver","value":"fake-hardware"},{"op":"replace","path":"/power_interface","value":"fake"},{"op":"replace","path":"/management_interface","value":"fake"},{"op":"replace","path":"/boot_interface","value":"fake"},{"op":"replace","path":"/bios_interface","value":"fake"},{"op":"replace","path":"/firmware_interface","value":"fake"},{"op":"replace","path":"/raid_interface","value":"fake"},{"op":"replace","path":"/vendor_interface","value":"fake"},{"op":"replace","path":"/console_interface","value":"fake"},{"op":"replace","path":"/inspect_interface","value":"fake"},{"op":"replace","path":"/rescue_interface","value":"fake"},{"op":"replace","path":"/deploy_interface","value":"fake"}]`)
	if code != 200 || n["driver"] != "fake-hardware" || n["network_interface"] != "noop" {
		t.Errorf("back to fake-hardware naming the interfaces: %d %v", code, n)
	}
}

func TestHistoryFieldsByVersion(t *testing.T) {
	srv, _ := newNodeAPI(t)
	n := mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	code, h := call(t, srv, "GET", "/v1/nodes/n1/history?detail=true", "1.115", "")
	evs, _ := h["history"].([]any)
	if code != 200 || len(evs) == 0 {
		t.Fatalf("history: %d %v", code, h)
	}
	ev := evs[0].(map[string]any)
	if ev["state"] != "enroll" || ev["conductor"] != "c1" {
		t.Errorf("event at 1.115: state %v conductor %v", ev["state"], ev["conductor"])
	}
	base := []string{"uuid", "created_at", "severity", "event", "links"}
	detail := append(slices.Clone(base), "event_type", "conductor", "user")
	for _, tc := range []struct {
		version string
		query   string
		want    []string
	}{
		{"1.78", "", base},
		{"1.115", "", base},
		{"1.112", "?detail=true", detail},
		{"1.113", "?detail=true", append(slices.Clone(detail), "project")},
		{"1.115", "?detail=true", append(slices.Clone(detail), "project", "state", "target_provision_state", "duration_seconds")},
	} {
		_, h := call(t, srv, "GET", "/v1/nodes/n1/history"+tc.query, tc.version, "")
		got := keys(h["history"].([]any)[0].(map[string]any))
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("history%s at %s: keys %v, want %v", tc.query, tc.version, got, tc.want)
		}
	}
	id := ev["uuid"].(string)
	_, one := call(t, srv, "GET", "/v1/nodes/"+n["uuid"].(string)+"/history/"+id, "1.115", "")
	if one["state"] != "enroll" || one["event_type"] == nil {
		t.Errorf("one event is shown in detail: %v", one)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestAbortFromWaitCallBack(t *testing.T) {
	srv, st := newNodeAPI(t)
	n := mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	_, err := st.UpdateNode(context.Background(), n["uuid"].(string), func(n *proto.Node) error {
		n.ProvisionState = proto.StateDeployWait
		target := proto.StateActive
		n.TargetProvisionState = &target
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, srv, "PUT", "/v1/nodes/n1/states/provision", "1.109", `{"target":"abort"}`); code/100 != 4 {
		t.Fatalf("abort from wait call-back at 1.109: %d %v, want a refusal", code, body)
	}
	if _, got := call(t, srv, "GET", "/v1/nodes/n1", "1.115", ""); got["provision_state"] != "wait call-back" {
		t.Fatalf("refused abort changed the node: %v", got["provision_state"])
	}
	if code, body := call(t, srv, "PUT", "/v1/nodes/n1/states/provision", "1.110", `{"target":"abort"}`); code != 202 {
		t.Fatalf("abort from wait call-back at 1.110: %d %v", code, body)
	}
	_, got := call(t, srv, "GET", "/v1/nodes/n1", "1.115", "")
	if got["provision_state"] != "deploy failed" || got["last_error"] == nil {
		t.Errorf("after abort: %v, last_error %v", got["provision_state"], got["last_error"])
	}
}

func TestVersionDocumentsAndRequestID(t *testing.T) {
	srv, _ := newNodeAPI(t)
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get(proto.HeaderMaxVersion) != "1.115" {
		t.Errorf("maximum version header %q", resp.Header.Get(proto.HeaderMaxVersion))
	}
	if a, b := resp.Header.Get("Openstack-Request-Id"), resp.Header.Get("X-Openstack-Request-Id"); a == "" || a != b {
		t.Errorf("request id headers %q and %q differ", a, b)
	}
	_, root := call(t, srv, "GET", "/", "", "")
	if v := root["default_version"].(map[string]any)["version"]; v != "1.115" {
		t.Errorf("GET / default_version.version = %v", v)
	}
	_, v1 := call(t, srv, "GET", "/v1/", "1.115", "")
	if v := v1["version"].(map[string]any)["version"]; v != "1.115" {
		t.Errorf("GET /v1/ version.version = %v", v)
	}
	if _, ok := v1["shards"]; !ok {
		t.Error("GET /v1/ at 1.115 has no shards link")
	}
	if code, _ := call(t, srv, "GET", "/v1/", "1.116", ""); code != 406 {
		t.Errorf("1.116: %d, want 406", code)
	}
}

// equalJSON compares two decoded JSON values by their encoding.
func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func TestDisableRamdiskByVerb(t *testing.T) {
	srv, _ := newNodeAPI(t)
	mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	for _, tc := range []struct {
		name, version, body string
		want                int
	}{
		{"clean below 1.70", "1.69", `{"target":"clean","clean_steps":[],"disable_ramdisk":true}`, 406},
		{"service below 1.108", "1.107", `{"target":"service","service_steps":[],"disable_ramdisk":true}`, 406},
		{"deploy never", "1.115", `{"target":"active","disable_ramdisk":true}`, 400},
		{"provide never", "1.115", `{"target":"provide","disable_ramdisk":false}`, 400},
	} {
		code, body := call(t, srv, "PUT", "/v1/nodes/n1/states/provision", tc.version, tc.body)
		if code != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.name, code, body, tc.want)
		}
	}
	// At 1.108 service with disable_ramdisk passes the body check and
	// meets the state machine: an enroll node cannot be serviced.
	code, body := call(t, srv, "PUT", "/v1/nodes/n1/states/provision", "1.108", `{"target":"service","service_steps":[],"disable_ramdisk":true}`)
	if code != 400 || !strings.Contains(faultString(t, body), "enroll") {
		t.Errorf("service at 1.108 from enroll: %d %v, want the state error", code, body)
	}
}

// python-ironicclient sends boolean flags as strings ("True"); Ironic's
// schemas accept them, and so must Kiln's.
func TestBooleanStringsAsIronicReadsThem(t *testing.T) {
	srv, _ := newNodeAPI(t)
	n := mustNode(t, srv, `{"driver":"fake-hardware","name":"n1","automated_clean":"False","disable_power_off":"yes"}`)
	if n["automated_clean"] != false || n["disable_power_off"] != true {
		t.Fatalf("create with string booleans: %v %v", n["automated_clean"], n["disable_power_off"])
	}
	code, n := call(t, srv, "PATCH", "/v1/nodes/n1", "1.115", `[{"op":"add","path":"/retired","value":"True"}]`)
	if code != 200 || n["retired"] != true {
		t.Fatalf("patch retired \"True\": %d %v", code, n["retired"])
	}
	if code, body := call(t, srv, "PATCH", "/v1/nodes/n1", "1.115", `[{"op":"add","path":"/retired","value":"perhaps"}]`); code != 400 || !strings.Contains(faultString(t, body), "retired") {
		t.Errorf("patch retired \"perhaps\": %d %v", code, body)
	}
	code, p := call(t, srv, "POST", "/v1/ports", "1.115", `{"node_uuid":"`+n["uuid"].(string)+`","address":"52:54:00:00:00:09","pxe_enabled":"False"}`)
	if code != 201 || p["pxe_enabled"] != false {
		t.Fatalf("port with pxe_enabled \"False\": %d %v", code, p)
	}
	code, p = call(t, srv, "PATCH", "/v1/ports/"+p["uuid"].(string), "1.115", `[{"op":"replace","path":"/pxe_enabled","value":"True"}]`)
	if code != 200 || p["pxe_enabled"] != true {
		t.Errorf("port patch pxe_enabled \"True\": %d %v", code, p)
	}
}
