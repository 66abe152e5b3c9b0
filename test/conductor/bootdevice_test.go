package conductor_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestBootDeviceThroughConductor: PUT …/management/boot_device answers only
// once the conductor has set the device on the BMC (fake-hardware holds it),
// 400 with the BMC's words for a device it does not allow; GET reads the BMC
// through the conductor, so it reports what the BMC holds, not the last
// request, and a failing BMC fails the GET.
func TestBootDeviceThroughConductor(t *testing.T) {
	c := startController(t, controllerOpts{})
	code, n := c.call("POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "name": "bootdev",
		"driver_info": map[string]any{"fake_boot_devices": []string{"pxe", "disk"}}})
	if code != 201 {
		t.Fatalf("create node: %d %v", code, n)
	}
	path := "/v1/nodes/" + n["uuid"].(string) + "/management/boot_device"

	if code, out := c.call("GET", path, nil); code != 200 || out["boot_device"] != nil {
		t.Errorf("GET before any set = %d %v, want 200 and no device", code, out)
	}
	if code, out := c.call("PUT", path, map[string]any{"boot_device": "disk", "persistent": true}); code != 204 {
		t.Fatalf("PUT disk = %d %v", code, out)
	}
	if code, out := c.call("GET", path, nil); code != 200 || out["boot_device"] != "disk" || out["persistent"] != true {
		t.Errorf("GET after PUT disk = %d %v", code, out)
	}
	code, out := c.call("PUT", path, map[string]any{"boot_device": "cdrom"})
	if code != 400 || !strings.Contains(errorText(out), "fake BMC: boot device cdrom is not allowed") {
		t.Errorf("PUT cdrom (not allowed by the BMC) = %d %v, want 400 with the BMC's words", code, out)
	}
	if code, out := c.call("GET", path, nil); code != 200 || out["boot_device"] != "disk" {
		t.Errorf("GET after a refused PUT = %d %v, want the BMC's disk", code, out)
	}

	// The conductor recorded the exchange: validate shows it without
	// asking the BMC again.
	if code, out := c.call("GET", "/v1/nodes/bootdev/validate", nil); code != 200 ||
		!strings.Contains(fmt.Sprint(out["management"]), "the BMC last answered") {
		t.Errorf("validate after a boot device read = %d %v, want the last BMC check in the management reason", code, out["management"])
	}

	if code, out := c.call("PATCH", "/v1/nodes/bootdev", []map[string]any{
		{"op": "add", "path": "/driver_info/fake_management_error", "value": "BMC unreachable"}}); code != 200 {
		t.Fatalf("patch: %d %v", code, out)
	}
	code, out = c.call("GET", path, nil)
	if code != 500 || !strings.Contains(errorText(out), "BMC unreachable") {
		t.Errorf("GET with a failing BMC = %d %v, want 500 with the BMC's error", code, out)
	}
	code, out = c.call("PUT", path, map[string]any{"boot_device": "pxe"})
	if code != 500 || !strings.Contains(errorText(out), "BMC unreachable") {
		t.Errorf("PUT with a failing BMC = %d %v, want 500", code, out)
	}
}

// errorText is the faultstring of an Ironic error body.
func errorText(out map[string]any) string {
	s, _ := out["error_message"].(string)
	return s
}
