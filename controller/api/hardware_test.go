package api_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

const hwNode = "6d85703a-565d-469a-96ce-30b6de53079d"

// hardwareServer is the API on a fresh store holding one node, "hw1",
// with two BIOS settings and two firmware components.
func hardwareServer(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	name := "hw1"
	if err := st.CreateNode(ctx, &proto.Node{UUID: hwNode, Name: &name, Driver: "fake-hardware"}); err != nil {
		t.Fatal(err)
	}
	hw, err := store.NewNodeHardware(st)
	if err != nil {
		t.Fatal(err)
	}
	s := func(v string) *string { return &v }
	no := false
	if err := hw.ReplaceBIOS(ctx, hwNode, []proto.BIOSSetting{
		{Name: "Virtualization", Value: s("Enabled"), AttributeType: s("Enumeration"), AllowableValues: []string{"Enabled", "Disabled"}, ReadOnly: &no},
		{Name: "AssetTag", Value: nil},
	}); err != nil {
		t.Fatal(err)
	}
	if err := hw.ReplaceFirmware(ctx, hwNode, []proto.FirmwareComponent{
		{Component: "bios", InitialVersion: "1.0", CurrentVersion: s("1.0")},
		{Component: "bmc", InitialVersion: "5.1", CurrentVersion: s("5.2"), LastVersionFlashed: s("5.2")},
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1"}))
	t.Cleanup(srv.Close)
	return srv
}

// pySample reads an API-reference sample written with Python's None.
func pySample(t *testing.T, name string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(apiRefSample(t, name), "None", "null")), &out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// TestBIOSShapes compares the BIOS answers with Ironic's samples.
func TestBIOSShapes(t *testing.T) {
	srv := hardwareServer(t)
	code, got := call(t, srv, "GET", "/v1/nodes/hw1/bios", "1.40", "")
	if code != 200 {
		t.Fatalf("list: %d %v", code, got)
	}
	sameShape(t, "bios list", pySample(t, "node-bios-list-response.json"), got)
	code, got = call(t, srv, "GET", "/v1/nodes/hw1/bios?detail=true", "1.74", "")
	if code != 200 {
		t.Fatalf("list detail: %d %v", code, got)
	}
	sameShape(t, "bios list detail", pySample(t, "node-bios-list-details-response.json"), got)
	first := got["bios"].([]any)[0].(map[string]any)
	if first["name"] != "AssetTag" || first["value"] != nil {
		t.Errorf("first setting (by name): %v", first)
	}
	code, got = call(t, srv, "GET", "/v1/nodes/hw1/bios/Virtualization", "1.74", "")
	if code != 200 {
		t.Fatalf("show: %d %v", code, got)
	}
	want := pySample(t, "node-bios-detail-response.json")
	sameShape(t, "bios show", want["virtualization"], got["Virtualization"])
	v := got["Virtualization"].(map[string]any)
	if v["value"] != "Enabled" || v["read_only"] != false || v["allowable_values"].([]any)[1] != "Disabled" {
		t.Errorf("show: %v", v)
	}
	if href := v["links"].([]any)[0].(map[string]any)["href"].(string); !strings.HasSuffix(href, "/v1/nodes/"+hwNode+"/bios/Virtualization") {
		t.Errorf("self link %s", href)
	}

	code, got = call(t, srv, "GET", "/v1/nodes/hw1/firmware", "1.86", "")
	if code != 200 {
		t.Fatalf("firmware: %d %v", code, got)
	}
	fw := pySample(t, "node-firmware-components-list-response.json")
	for _, c := range fw["firmware"].([]any) {
		for _, k := range []string{"vendor", "model", "serial_number"} {
			delete(c.(map[string]any), k)
		}
	}
	sameShape(t, "firmware list", fw, got)
	bmc := got["firmware"].([]any)[1].(map[string]any)
	if bmc["component"] != "bmc" || bmc["current_version"] != "5.2" || bmc["initial_version"] != "5.1" {
		t.Errorf("firmware bmc: %v", bmc)
	}
}

// TestBIOSVersionsAndErrors: the registry fields, ?detail and ?fields
// appear at 1.74, the endpoints at 1.40 and 1.86, and bad requests get
// Ironic's answers.
func TestBIOSVersionsAndErrors(t *testing.T) {
	srv := hardwareServer(t)
	for _, c := range []struct {
		name, path, version string
		code                int
		keys                string // sorted keys of the first setting, or the error text
	}{
		{"list before 1.40", "/v1/nodes/hw1/bios", "1.39", 404, ""},
		{"show before 1.40", "/v1/nodes/hw1/bios/Virtualization", "1.39", 404, ""},
		{"list 1.40", "/v1/nodes/hw1/bios", "1.40", 200, "created_at,links,name,updated_at,value"},
		{"list 1.74 without detail", "/v1/nodes/hw1/bios", "1.74", 200, "created_at,links,name,updated_at,value"},
		{"detail before 1.74", "/v1/nodes/hw1/bios?detail=true", "1.73", 406, ""},
		{"fields before 1.74", "/v1/nodes/hw1/bios?fields=name", "1.73", 406, ""},
		{"fields", "/v1/nodes/hw1/bios?fields=name,read_only", "1.74", 200, "created_at,links,name,read_only,updated_at"},
		{"detail and fields", "/v1/nodes/hw1/bios?detail=true&fields=name", "1.74", 400, "Can not specify ?detail=True and fields"},
		{"unknown field", "/v1/nodes/hw1/bios?fields=colour", "1.74", 400, "colour"},
		{"bad detail", "/v1/nodes/hw1/bios?detail=maybe", "1.74", 400, "detail"},
		{"missing node", "/v1/nodes/nope/bios", "1.74", 404, "Node nope could not be found"},
		{"missing setting", "/v1/nodes/hw1/bios/Nope", "1.74", 404, "Node " + hwNode + " doesn't have a BIOS setting 'Nope'"},
		{"firmware before 1.86", "/v1/nodes/hw1/firmware", "1.85", 404, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, srv, "GET", c.path, c.version, "")
			if code != c.code {
				t.Fatalf("status %d, want %d: %v", code, c.code, body)
			}
			if c.keys == "" {
				return
			}
			if code != 200 {
				if msg, _ := body["error_message"].(string); !strings.Contains(msg, c.keys) {
					t.Errorf("error %q does not say %q", msg, c.keys)
				}
				return
			}
			first := body["bios"].([]any)[0].(map[string]any)
			var keys []string
			for k := range first {
				keys = append(keys, k)
			}
			if got := strings.Join(slices.Sorted(slices.Values(keys)), ","); got != c.keys {
				t.Errorf("keys %s, want %s", got, c.keys)
			}
		})
	}
	// One setting at 1.40 shows no registry fields; at 1.74 all of them.
	_, body := call(t, srv, "GET", "/v1/nodes/hw1/bios/Virtualization", "1.40", "")
	if _, has := body["Virtualization"].(map[string]any)["attribute_type"]; has {
		t.Error("attribute_type shown at 1.40")
	}
	_, body = call(t, srv, "GET", "/v1/nodes/hw1/bios/Virtualization", "1.74", "")
	for _, f := range proto.BIOSRegistryFields {
		if _, has := body["Virtualization"].(map[string]any)[f]; !has {
			t.Errorf("%s missing at 1.74", f)
		}
	}
}
