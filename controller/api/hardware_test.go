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
		{Component: "bmc", InitialVersion: "5.1", CurrentVersion: s("5.2"), LastVersionFlashed: s("5.2"), Model: s("iDRAC 9")},
		{Component: "NIC:ABC12345", InitialVersion: "22.0.9", CurrentVersion: s("22.5.0"),
			Vendor: s("Intel Corporation"), Model: s("Intel(R) 25GbE 2P XXV710 Adptr"), SerialNumber: s("ABC12345")},
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

	code, got = call(t, srv, "GET", "/v1/nodes/hw1/firmware", "1.114", "")
	if code != 200 {
		t.Fatalf("firmware: %d %v", code, got)
	}
	sameShape(t, "firmware list at 1.114", pySample(t, "node-firmware-components-list-response.json"), got)
	comps := got["firmware"].([]any)
	nic := comps[0].(map[string]any)
	if nic["component"] != "NIC:ABC12345" || nic["vendor"] != "Intel Corporation" || nic["serial_number"] != "ABC12345" {
		t.Errorf("firmware NIC: %v", nic)
	}
	bmc := comps[2].(map[string]any)
	if bmc["component"] != "bmc" || bmc["current_version"] != "5.2" || bmc["initial_version"] != "5.1" ||
		bmc["model"] != "iDRAC 9" || bmc["vendor"] != nil {
		t.Errorf("firmware bmc: %v", bmc)
	}

	// Below 1.114 the sample's shape without vendor, model and serial_number.
	code, got = call(t, srv, "GET", "/v1/nodes/hw1/firmware", "1.113", "")
	if code != 200 {
		t.Fatalf("firmware at 1.113: %d %v", code, got)
	}
	fw := pySample(t, "node-firmware-components-list-response.json")
	for _, c := range fw["firmware"].([]any) {
		for _, k := range []string{"vendor", "model", "serial_number"} {
			delete(c.(map[string]any), k)
		}
	}
	sameShape(t, "firmware list at 1.113", fw, got)
}

// TestFirmwareFieldsAndVersions: vendor, model and serial_number are
// hidden below 1.114 and naming them there is 400, as in Ironic; ?fields
// picks fields (the timestamps always come), ?detail shows every field.
func TestFirmwareFieldsAndVersions(t *testing.T) {
	srv := hardwareServer(t)
	const base = "component,created_at,current_version,initial_version,last_version_flashed,updated_at"
	for _, c := range []struct {
		name, path, version string
		code                int
		keys                string // sorted keys of each component, or the error text
	}{
		{"1.86", "/v1/nodes/hw1/firmware", "1.86", 200, base},
		{"1.113", "/v1/nodes/hw1/firmware", "1.113", 200, base},
		{"1.114", "/v1/nodes/hw1/firmware", "1.114", 200, "component,created_at,current_version,initial_version,last_version_flashed,model,serial_number,updated_at,vendor"},
		{"detail at 1.113", "/v1/nodes/hw1/firmware?detail=true", "1.113", 200, base},
		{"detail at 1.114", "/v1/nodes/hw1/firmware?detail=true", "1.115", 200, "component,created_at,current_version,initial_version,last_version_flashed,model,serial_number,updated_at,vendor"},
		{"fields", "/v1/nodes/hw1/firmware?fields=component,current_version", "1.86", 200, "component,created_at,current_version,updated_at"},
		{"identity fields at 1.114", "/v1/nodes/hw1/firmware?fields=component,vendor,serial_number", "1.114", 200, "component,created_at,serial_number,updated_at,vendor"},
		{"identity fields at 1.113", "/v1/nodes/hw1/firmware?fields=component,serial_number,model", "1.113", 400,
			"Fields model, serial_number are not allowed in this API version. They require at least API version 1.114."},
		{"unknown field", "/v1/nodes/hw1/firmware?fields=colour", "1.114", 400, "colour"},
		{"detail and fields", "/v1/nodes/hw1/firmware?detail=true&fields=model", "1.114", 400, "Can not specify ?detail=True and fields"},
		{"bad detail", "/v1/nodes/hw1/firmware?detail=maybe", "1.114", 400, "detail"},
		{"missing node", "/v1/nodes/nope/firmware", "1.114", 404, "Node nope could not be found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, srv, "GET", c.path, c.version, "")
			if code != c.code {
				t.Fatalf("status %d, want %d: %v", code, c.code, body)
			}
			if code != 200 {
				if msg, _ := body["error_message"].(string); !strings.Contains(msg, c.keys) {
					t.Errorf("error %q does not say %q", msg, c.keys)
				}
				return
			}
			comps := body["firmware"].([]any)
			if len(comps) != 3 {
				t.Fatalf("%d components, want 3: %v", len(comps), comps)
			}
			for _, fc := range comps {
				var keys []string
				for k := range fc.(map[string]any) {
					keys = append(keys, k)
				}
				if got := strings.Join(slices.Sorted(slices.Values(keys)), ","); got != c.keys {
					t.Errorf("keys %s, want %s", got, c.keys)
				}
			}
		})
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
