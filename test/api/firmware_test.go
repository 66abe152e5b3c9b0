package api_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// TestFirmwareIdentityOverHTTP flashes a fake-hardware node's BMC by
// manual cleaning through a real kiln serve, then reads the components
// with gophercloud at 1.114 (vendor, model and serial_number as the fake
// firmware interface reports them) and raw at 1.113 (hidden, and 400 when
// asked for by ?fields).
func TestFirmwareIdentityOverHTTP(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	if code, _, out := k.call("POST", "/v1/nodes", `{"name":"fw1","driver":"fake-hardware"}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	k.provision(t, "fw1", `{"target":"manage"}`)
	k.waitState(t, "fw1", "manageable")
	k.provision(t, "fw1", `{"target":"clean","clean_steps":[{"interface":"firmware","step":"update",
		"args":{"settings":[{"component":"bmc","url":"https://images.example/bmc-2.1.0.bin"}]}}]}`)
	if n := k.waitState(t, "fw1", "manageable"); n["last_error"] != nil {
		t.Fatalf("firmware.update: last_error %v", n["last_error"])
	}

	comps, err := nodes.ListFirmware(context.Background(), newClient(t, k, "1.114"), "fw1").Extract()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]nodes.FirmwareComponent{}
	for _, c := range comps {
		got[c.Component] = c
	}
	deref := func(p *string) string {
		if p == nil {
			return "<null>"
		}
		return *p
	}
	for _, w := range []struct{ component, initial, current, flashed, vendor, model, serial string }{
		{"bios", "1.0.0", "1.0.0", "", "<null>", "<null>", "<null>"},
		// Nothing read the components before the flash: 2.1.0 is the first version seen.
		{"bmc", "2.1.0", "2.1.0", "2.1.0", "<null>", "Fake BMC", "<null>"},
		{"NIC:FAKE0001", "22.0.9", "22.0.9", "", "Kiln", "Fake 25GbE 2P Adapter", "FAKE0001"},
	} {
		c, ok := got[w.component]
		if !ok {
			t.Errorf("no component %s in %+v", w.component, comps)
			continue
		}
		if c.InitialVersion != w.initial || c.CurrentVersion != w.current || c.LastVersionFlashed != w.flashed ||
			deref(c.Vendor) != w.vendor || deref(c.Model) != w.model || deref(c.SerialNumber) != w.serial {
			t.Errorf("%s: %+v (vendor %s model %s serial %s), want %+v", w.component, c, deref(c.Vendor), deref(c.Model), deref(c.SerialNumber), w)
		}
	}
	if len(comps) != 3 {
		t.Errorf("%d components, want 3", len(comps))
	}

	code, _, b := k.call("GET", "/v1/nodes/fw1/firmware", "", "X-OpenStack-Ironic-API-Version", "1.113")
	if code != http.StatusOK {
		t.Fatalf("GET at 1.113: %d %s", code, b)
	}
	for _, c := range mustJSON(t, b)["firmware"].([]any) {
		for _, k := range []string{"vendor", "model", "serial_number"} {
			if _, ok := c.(map[string]any)[k]; ok {
				t.Errorf("%s shown at 1.113: %v", k, c)
			}
		}
	}
	code, _, b = k.call("GET", "/v1/nodes/fw1/firmware?fields=component,model", "", "X-OpenStack-Ironic-API-Version", "1.113")
	if code != http.StatusBadRequest {
		t.Errorf("?fields=model at 1.113: %d %s, want 400", code, b)
	}
}
