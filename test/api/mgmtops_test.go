package api_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/bmcsim"
)

// at sends the request at microversion v.
func at(v string) []string { return []string{"X-OpenStack-Ironic-API-Version", v} }

// waitNode polls the node until ok says so; the deadline is a safety net.
func (k *kiln) waitNode(t *testing.T, name string, ok func(n map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, _, b := k.call("GET", "/v1/nodes/"+name, "", at("1.95")...)
		n := mustJSON(t, b)
		if ok(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s never got there: boot_mode %v secure_boot %v last_error %v", name, n["boot_mode"], n["secure_boot"], n["last_error"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantCode checks one exchange's status and that an error is in Ironic's
// body with want in its faultstring.
func wantCode(t *testing.T, what string, code int, b []byte, wantCode int, want string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: %d %s, want %d", what, code, b, wantCode)
		return
	}
	if want != "" && (!strings.Contains(string(b), "error_message") || !strings.Contains(string(b), want)) {
		t.Errorf("%s: body %s, want an Ironic error saying %q", what, b, want)
	}
}

// TestManagementEndpointsFake: NMI (1.29), indicators (1.63) and the boot
// mode and secure boot changes (1.76) of a fake-hardware node through a
// real kiln serve: microversion gating, Ironic's status codes and bodies,
// bad input refused, and the asynchronous changes landing on the node.
func TestManagementEndpointsFake(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	if code, _, b := k.call("POST", "/v1/nodes", `{"name":"m1","driver":"fake-hardware"}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}

	// NMI.
	code, _, b := k.call("PUT", "/v1/nodes/m1/management/inject_nmi", `{}`, at("1.28")...)
	wantCode(t, "inject_nmi at 1.28", code, b, http.StatusNotFound, "")
	code, _, b = k.call("PUT", "/v1/nodes/m1/management/inject_nmi", `{}`, at("1.29")...)
	wantCode(t, "inject_nmi", code, b, http.StatusNoContent, "")
	code, _, b = k.call("PUT", "/v1/nodes/m1/management/inject_nmi", `{"now":true}`, at("1.29")...)
	wantCode(t, "inject_nmi with a field", code, b, http.StatusBadRequest, "'now' was unexpected")
	code, _, b = k.call("PUT", "/v1/nodes/nope/management/inject_nmi", `{}`, at("1.29")...)
	wantCode(t, "inject_nmi of an unknown node", code, b, http.StatusNotFound, "Node nope could not be found")

	// Indicators.
	code, _, b = k.call("GET", "/v1/nodes/m1/management/indicators", "", at("1.62")...)
	wantCode(t, "indicators at 1.62", code, b, http.StatusNotFound, "")
	code, _, b = k.call("GET", "/v1/nodes/m1/management/indicators", "", at("1.63")...)
	if code != http.StatusOK {
		t.Fatalf("indicators: %d %s", code, b)
	}
	inds, _ := mustJSON(t, b)["indicators"].([]any)
	if len(inds) != 1 {
		t.Fatalf("indicators: %s", b)
	}
	led := inds[0].(map[string]any)
	if led["name"] != "led@system" || led["component"] != "system" || led["readonly"] != false ||
		fmt.Sprint(led["states"]) != "[blinking off on]" || !strings.Contains(fmt.Sprint(led["links"]), "/v1/nodes/m1/management/indicators/led@system") {
		t.Errorf("indicator: %v", led)
	}
	state := func() any {
		t.Helper()
		code, _, b := k.call("GET", "/v1/nodes/m1/management/indicators/led@system", "", at("1.63")...)
		if code != http.StatusOK {
			t.Fatalf("GET led@system: %d %s", code, b)
		}
		return mustJSON(t, b)["state"]
	}
	if s := state(); s != "off" {
		t.Errorf("led state %v, want off", s)
	}
	code, _, b = k.call("PUT", "/v1/nodes/m1/management/indicators/led@system", `{"state":"BLINKING"}`, at("1.63")...)
	wantCode(t, "PUT led@system", code, b, http.StatusNoContent, "")
	if s := state(); s != "blinking" {
		t.Errorf("led state %v after PUT blinking, want blinking", s)
	}
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"PUT", "led@system", `{"state":"green"}`, http.StatusBadRequest, "not one of blinking, off, on"},
		{"PUT", "led@system", `{}`, http.StatusBadRequest, "Missing argument"},
		{"PUT", "led@system", `{"state":"on","colour":"red"}`, http.StatusBadRequest, "'colour' was unexpected"},
		{"GET", "led", "", http.StatusBadRequest, `Malformed indicator name`},
		{"GET", "led@chassis", "", http.StatusBadRequest, "has no indicator led@chassis"},
	} {
		code, _, b := k.call(tc.method, "/v1/nodes/m1/management/indicators/"+tc.path, tc.body, at("1.63")...)
		wantCode(t, tc.method+" "+tc.path+" "+tc.body, code, b, tc.code, tc.want)
	}
	if s := state(); s != "blinking" {
		t.Errorf("led state %v after refused requests, want blinking still", s)
	}

	// Boot mode and secure boot: 202, then the node's fields.
	code, _, b = k.call("PUT", "/v1/nodes/m1/states/boot_mode", `{"target":"bios"}`, at("1.75")...)
	wantCode(t, "boot_mode at 1.75", code, b, http.StatusNotFound, "starting with the API version 1.76")
	code, _, b = k.call("PUT", "/v1/nodes/m1/states/boot_mode", `{"target":"floppy"}`, at("1.76")...)
	wantCode(t, "boot_mode floppy", code, b, http.StatusBadRequest, "Invalid boot mode")
	code, _, b = k.call("PUT", "/v1/nodes/m1/states/secure_boot", `{"target":"maybe"}`, at("1.76")...)
	wantCode(t, "secure_boot maybe", code, b, http.StatusBadRequest, "Invalid secure_boot")
	code, _, b = k.call("PUT", "/v1/nodes/m1/states/secure_boot", `{}`, at("1.76")...)
	wantCode(t, "secure_boot without target", code, b, http.StatusBadRequest, "Missing argument")
	if n := k.waitNode(t, "m1", func(map[string]any) bool { return true }); n["boot_mode"] != nil || n["secure_boot"] != nil {
		t.Errorf("refused requests changed the node: boot_mode %v secure_boot %v", n["boot_mode"], n["secure_boot"])
	}
	code, hdr, b := k.call("PUT", "/v1/nodes/m1/states/boot_mode", `{"target":"bios"}`, at("1.76")...)
	wantCode(t, "boot_mode bios", code, b, http.StatusAccepted, "")
	if loc := hdr.Get("Location"); !strings.HasSuffix(loc, "/states") {
		t.Errorf("Location %q", loc)
	}
	k.waitNode(t, "m1", func(n map[string]any) bool { return n["boot_mode"] == "bios" && n["last_error"] == nil })
	code, _, b = k.call("PUT", "/v1/nodes/m1/states/secure_boot", `{"target":true}`, at("1.76")...)
	wantCode(t, "secure_boot true", code, b, http.StatusAccepted, "")
	n := k.waitNode(t, "m1", func(n map[string]any) bool { return n["secure_boot"] == true })
	if n["boot_mode"] != "bios" || n["last_error"] != nil {
		t.Errorf("after secure boot on: boot_mode %v last_error %v", n["boot_mode"], n["last_error"])
	}

	// A node moving between states is left alone (409).
	if code, _, b := k.call("POST", "/v1/nodes", `{"name":"busy","driver":"fake-hardware","driver_info":{"fake_deploy_delay":600}}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	k.provision(t, "busy", `{"target":"manage"}`)
	k.waitState(t, "busy", "manageable")
	k.provision(t, "busy", `{"target":"provide"}`)
	k.waitNode(t, "busy", func(n map[string]any) bool { return n["provision_state"] == "cleaning" })
	code, _, b = k.call("PUT", "/v1/nodes/busy/states/boot_mode", `{"target":"uefi"}`, at("1.76")...)
	wantCode(t, "boot_mode while cleaning", code, b, http.StatusConflict, "")
}

// TestManagementEndpointsRedfish: the same endpoints of a redfish node
// against the simulator: the BMC's LED, boot override mode and SecureBoot
// change, and the node's boot_mode and secure_boot follow what the BMC
// reports.
func TestManagementEndpointsRedfish(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: "generic"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	k.hwNode(t, "r1", lab.BMCs[0])
	if code, _, b := k.call("PUT", "/v1/nodes/r1/states/power", `{"target":"power on"}`); code != http.StatusAccepted {
		t.Fatalf("power on: %d %s", code, b)
	}
	k.waitNode(t, "r1", func(n map[string]any) bool { return n["power_state"] == "power on" && n["target_power_state"] == nil })

	before := lab.Requests()[0]
	code, _, b := k.call("PUT", "/v1/nodes/r1/management/inject_nmi", `{}`, at("1.29")...)
	wantCode(t, "redfish inject_nmi", code, b, http.StatusNoContent, "")
	if lab.Requests()[0] == before {
		t.Error("inject_nmi sent no BMC request")
	}
	code, _, b = k.call("PUT", "/v1/nodes/r1/management/indicators/led@system", `{"state":"on"}`, at("1.63")...)
	wantCode(t, "redfish PUT led", code, b, http.StatusNoContent, "")
	code, _, b = k.call("GET", "/v1/nodes/r1/management/indicators/led@system", "", at("1.63")...)
	if code != http.StatusOK || mustJSON(t, b)["state"] != "on" {
		t.Errorf("redfish GET led: %d %s", code, b)
	}

	for _, mode := range []string{"bios", "uefi"} {
		code, _, b = k.call("PUT", "/v1/nodes/r1/states/boot_mode", `{"target":"`+mode+`"}`, at("1.76")...)
		wantCode(t, "redfish boot_mode "+mode, code, b, http.StatusAccepted, "")
		k.waitNode(t, "r1", func(n map[string]any) bool { return n["boot_mode"] == mode && n["last_error"] == nil })
	}
	for _, on := range []bool{true, false} {
		code, _, b = k.call("PUT", "/v1/nodes/r1/states/secure_boot", fmt.Sprintf(`{"target":%v}`, on), at("1.76")...)
		wantCode(t, fmt.Sprint("redfish secure_boot ", on), code, b, http.StatusAccepted, "")
		k.waitNode(t, "r1", func(n map[string]any) bool { return n["secure_boot"] == on && n["last_error"] == nil })
	}

	// A BMC failure lands in last_error (the request was accepted).
	if err := lab.SetFaults(bmcsim.Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	code, _, b = k.call("PUT", "/v1/nodes/r1/states/secure_boot", `{"target":true}`, at("1.76")...)
	wantCode(t, "secure_boot on a failing BMC", code, b, http.StatusAccepted, "")
	n := k.waitNode(t, "r1", func(n map[string]any) bool {
		msg, _ := n["last_error"].(string)
		return strings.Contains(msg, "Failed to set secure boot for node")
	})
	if n["secure_boot"] != false {
		t.Errorf("after a failed change: secure_boot %v, want false still", n["secure_boot"])
	}
}
