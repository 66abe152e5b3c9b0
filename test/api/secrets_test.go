package api_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/store"
)

// TestSecretsNeverLeave drives a real kiln serve the way the attacks of
// issue 12 did: nested and oddly named secrets must be masked in every view,
// JSON patch must not read them (copy, move, test), and a client writing the
// masked copy back must keep the stored secrets.
func TestSecretsNeverLeave(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "kiln.db")
	k := startKiln(t, db)
	driverInfo := map[string]any{
		"redfish_address":  "https://bmc.example",
		"redfish_password": "S-redfish",
		"passphrase":       "S-phrase",
		"bmc_passwd":       "S-passwd",
		"snmp_community":   "S-community",
		"keyboard":         "us-layout",
		"nested":           map[string]any{"x": map[string]any{"password": "S-nested", "user": "admin"}},
		"list":             []any{map[string]any{"ssh_key": "S-sshkey", "monkey_business": "visible"}},
	}
	body, _ := json.Marshal(map[string]any{
		"driver": "fake-hardware", "name": "secret-node", "driver_info": driverInfo,
		"instance_info": map[string]any{"configdrive": "S-configdrive", "image_source": "http://images.example/x.raw"},
		"extra":         map[string]any{"api_key": "S-apikey"},
	})
	code, _, b := k.call("POST", "/v1/nodes", string(body))
	if code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	uuid := mustJSON(t, b)["uuid"].(string)
	secretValues := []string{"S-redfish", "S-phrase", "S-passwd", "S-community", "S-nested", "S-sshkey", "S-configdrive", "S-apikey"}
	noSecret := func(what string, b []byte) {
		t.Helper()
		for _, s := range secretValues {
			if strings.Contains(string(b), s) {
				t.Errorf("%s shows secret %s: %s", what, s, b)
			}
		}
	}
	noSecret("POST answer", b)

	for _, path := range []string{
		"/v1/nodes/" + uuid, "/v1/nodes/secret-node", "/v1/nodes/" + uuid + "?fields=driver_info",
		"/v1/nodes/" + uuid + "?fields=driver_info,instance_info,extra", "/v1/nodes/detail",
		"/v1/nodes?fields=uuid,driver_info,instance_info,extra",
	} {
		code, _, b := k.call("GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		noSecret("GET "+path, b)
		if strings.Contains(path, "driver_info") && (!strings.Contains(string(b), "us-layout") || !strings.Contains(string(b), `"visible"`)) {
			t.Errorf("GET %s hides values that are not secret: %s", path, b)
		}
	}

	refused := []struct{ name, patch string }{
		{"copy from a secret", `[{"op":"copy","from":"/driver_info/redfish_password","path":"/extra/leak"}]`},
		{"move from the config drive", `[{"op":"move","from":"/instance_info/configdrive","path":"/extra/leak"}]`},
		{"copy of driver_info as a whole", `[{"op":"copy","from":"/driver_info","path":"/extra/leak"}]`},
		{"copy of a parent of a nested secret", `[{"op":"copy","from":"/driver_info/nested","path":"/extra/leak"}]`},
		{"move of a list holding a secret", `[{"op":"move","from":"/driver_info/list","path":"/extra/leak"}]`},
		{"copy from a secret not stored", `[{"op":"copy","from":"/driver_info/ipmi_password","path":"/extra/leak"}]`},
	}
	for _, tc := range refused {
		code, _, b := k.call("PATCH", "/v1/nodes/"+uuid, tc.patch)
		if code != 400 {
			t.Errorf("%s: %d, want 400: %s", tc.name, code, b)
		}
		noSecret(tc.name, b)
	}
	// test must not be an oracle: right and wrong guesses get the same answer.
	var answers []string
	for _, guess := range []string{`"S-redfish"`, `"wrong"`} {
		code, _, b := k.call("PATCH", "/v1/nodes/"+uuid, `[{"op":"test","path":"/driver_info/redfish_password","value":`+guess+`},{"op":"add","path":"/extra/guessed","value":true}]`)
		if code != 400 {
			t.Errorf("test with guess %s: %d, want 400: %s", guess, code, b)
		}
		answers = append(answers, faultstring(t, b))
	}
	if answers[0] != answers[1] {
		t.Errorf("test answers differ between a right and a wrong guess: %q vs %q", answers[0], answers[1])
	}
	code, _, b = k.call("PATCH", "/v1/nodes/"+uuid, `[{"op":"test","path":"/driver_info/nested","value":{"x":{"password":"S-nested","user":"admin"}}}]`)
	if code != 400 {
		t.Errorf("test of a parent of a secret: %d, want 400: %s", code, b)
	}
	_, _, b = k.call("GET", "/v1/nodes/"+uuid, "")
	if extra := mustJSON(t, b)["extra"].(map[string]any); extra["leak"] != nil || extra["guessed"] != nil {
		t.Errorf("a refused patch changed extra: %v", extra)
	}

	// A client writes back what it read: the masked driver_info as a whole,
	// then a nested masked value on its own, and changes one plain field.
	_, _, b = k.call("GET", "/v1/nodes/"+uuid, "")
	masked := mustJSON(t, b)["driver_info"]
	mb, _ := json.Marshal(masked)
	code, _, b = k.call("PATCH", "/v1/nodes/"+uuid, `[{"op":"replace","path":"/driver_info","value":`+string(mb)+`},`+
		`{"op":"replace","path":"/driver_info/nested/x/password","value":"******"},`+
		`{"op":"replace","path":"/instance_info/configdrive","value":"******"},`+
		`{"op":"replace","path":"/driver_info/keyboard","value":"de-layout"}]`)
	if code != 200 {
		t.Fatalf("write back the masked node: %d %s", code, b)
	}
	noSecret("PATCH answer", b)
	noSecret("kiln serve log", []byte(k.Logs()))
	k.stop()

	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.GetNode(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for k, v := range driverInfo {
		want[k] = v
	}
	want["keyboard"] = "de-layout"
	got, _ := json.Marshal(n.DriverInfo)
	wantJSON, _ := json.Marshal(want)
	var g, w any
	_ = json.Unmarshal(got, &g)
	_ = json.Unmarshal(wantJSON, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("stored driver_info after writing the masked copy back:\n got %s\nwant %s", got, wantJSON)
	}
	if n.InstanceInfo["configdrive"] != "S-configdrive" {
		t.Errorf("stored configdrive became %v", n.InstanceInfo["configdrive"])
	}
}

// TestErrorsScrubbed: a BMC error quoting a URL with credentials and an
// agent token reaches validate, last_error, history and the log of a real
// kiln serve with both scrubbed.
func TestErrorsScrubbed(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	const bmcErr = "BMC https://admin:hunter2@10.0.0.5/redfish/v1 refused; agent at http://10.0.0.9:9999/v1/commands/?agent_token=tok-xyz-123"
	body, _ := json.Marshal(map[string]any{"driver": "fake-hardware", "driver_info": map[string]any{"fake_power_error": bmcErr}})
	code, _, b := k.call("POST", "/v1/nodes", string(body))
	if code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	uuid := mustJSON(t, b)["uuid"].(string)
	leaks := []string{"hunter2", "tok-xyz-123"}
	noLeak := func(what, text string) {
		t.Helper()
		for _, l := range leaks {
			if strings.Contains(text, l) {
				t.Errorf("%s shows %s: %s", what, l, text)
			}
		}
	}
	if code, _, b := k.call("PUT", "/v1/nodes/"+uuid+"/states/provision", `{"target":"manage"}`); code != 202 {
		t.Fatalf("manage: %d %s", code, b)
	}
	var lastError string
	for deadline := time.Now().Add(3 * time.Minute); lastError == ""; sleep() {
		_, _, b := k.call("GET", "/v1/nodes/"+uuid, "")
		n := mustJSON(t, b)
		if le, _ := n["last_error"].(string); le != "" && n["provision_state"] == "enroll" && n["target_provision_state"] == nil {
			lastError = le
		}
		if time.Now().After(deadline) {
			t.Fatalf("manage never failed: %s", b)
		}
	}
	if !strings.Contains(lastError, "refused") {
		t.Fatalf("last_error is not the BMC's error: %q", lastError)
	}
	noLeak("last_error", lastError)
	// Validate does not ask the BMC; it shows the conductor's last BMC
	// check, which is this failure.
	code, _, b = k.call("GET", "/v1/nodes/"+uuid+"/validate", "")
	if code != 200 || !strings.Contains(string(b), "refused") {
		t.Fatalf("validate: %d %s", code, b)
	}
	noLeak("validate", string(b))
	_, _, b = k.call("GET", "/v1/nodes/"+uuid+"/history?detail=true", "")
	if !strings.Contains(string(b), "refused") {
		t.Errorf("history lacks the failure: %s", b)
	}
	noLeak("history", string(b))
	k.stop()
	noLeak("kiln serve log", k.Logs())
}
