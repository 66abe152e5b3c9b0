package api_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeployTemplatesOpenstackClient runs every `openstack baremetal
// deploy template …` command against a real kiln serve and checks what
// each prints.
func TestDeployTemplatesOpenstackClient(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	run, jsonOut := stepsOSC(t, k)
	steps := `[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"LogicalProc","value":"Enabled"}]},"priority":150}]`
	var dt map[string]any
	jsonOut(&dt, "deploy", "template", "create", "CUSTOM_HYPERTHREADING_ON", "--steps", steps, "--extra", "a=b")
	id, _ := dt["uuid"].(string)
	gotSteps, _ := json.Marshal(dt["steps"])
	if id == "" || dt["name"] != "CUSTOM_HYPERTHREADING_ON" || fmt.Sprint(dt["extra"]) != "map[a:b]" ||
		!strings.Contains(string(gotSteps), `"priority":150`) || !strings.Contains(string(gotSteps), `"LogicalProc"`) {
		t.Fatalf("deploy template create printed %v", dt)
	}
	if out := run(false, "deploy", "template", "create", "hyperthreading", "--steps", steps); !strings.Contains(out, "(HTTP 400)") ||
		!strings.Contains(out, "must be a standard trait") {
		t.Errorf("create with a bad name printed %q", out)
	}
	if out := run(false, "deploy", "template", "create", "CUSTOM_HYPERTHREADING_ON", "--steps", steps); !strings.Contains(out,
		"A deploy template with name CUSTOM_HYPERTHREADING_ON already exists. (HTTP 409)") {
		t.Errorf("create with a taken name printed %q", out)
	}
	var list []map[string]any
	jsonOut(&list, "deploy", "template", "list")
	if len(list) != 1 || list[0]["UUID"] != id || list[0]["Name"] != "CUSTOM_HYPERTHREADING_ON" {
		t.Errorf("deploy template list: %v", list)
	}
	list = nil
	jsonOut(&list, "deploy", "template", "list", "--long")
	if len(list) != 1 || list[0]["Steps"] == nil || fmt.Sprint(list[0]["Extra"]) != "map[a:b]" {
		t.Errorf("deploy template list --long: %v", list)
	}
	run(true, "deploy", "template", "set", "CUSTOM_HYPERTHREADING_ON", "--name", "CUSTOM_HT_ON", "--extra", "c=d",
		"--steps", `[{"interface":"raid","step":"create_configuration","args":{},"priority":70}]`)
	run(true, "deploy", "template", "unset", id, "--extra", "a")
	dt = nil
	jsonOut(&dt, "deploy", "template", "show", "CUSTOM_HT_ON")
	gotSteps, _ = json.Marshal(dt["steps"])
	if dt["uuid"] != id || fmt.Sprint(dt["extra"]) != "map[c:d]" || dt["updated_at"] == nil ||
		string(gotSteps) != `[{"args":{},"interface":"raid","priority":70,"step":"create_configuration"}]` {
		t.Errorf("deploy template show after set/unset: %v (steps %s)", dt, gotSteps)
	}
	dt = nil
	jsonOut(&dt, "deploy", "template", "show", id, "--fields", "name")
	if len(dt) != 1 || dt["name"] != "CUSTOM_HT_ON" {
		t.Errorf("show --fields name: %v", dt)
	}
	if out := run(true, "deploy", "template", "delete", "CUSTOM_HT_ON"); !strings.Contains(out, "Deleted deploy template CUSTOM_HT_ON") {
		t.Errorf("delete printed %q", out)
	}
	if out := run(false, "deploy", "template", "show", id); !strings.Contains(out, "Deploy template "+id+" could not be found. (HTTP 404)") {
		t.Errorf("show of a deleted template printed %q", out)
	}
}

// TestDeployTemplatesOverHTTP: raw HTTP on a real kiln serve — the
// collection in GET /v1/ from 1.55, gating, and templates surviving a
// restart.
func TestDeployTemplatesOverHTTP(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "kiln.db")
	k := startKiln(t, db)
	code, _, b := k.call("GET", "/v1/", "")
	if code != 200 || !strings.Contains(string(b), `"deploy_templates"`) {
		t.Errorf("GET /v1/ at 1.95: %d %s", code, b)
	}
	code, _, b = k.call("GET", "/v1/", "", "X-OpenStack-Ironic-API-Version", "1.54")
	if code != 200 || strings.Contains(string(b), `"deploy_templates"`) {
		t.Errorf("GET /v1/ at 1.54 lists deploy templates: %d %s", code, b)
	}
	body := `{"name":"CUSTOM_A","steps":[{"interface":"deploy","step":"s","args":{"token":"sekrit"},"priority":1}]}`
	code, hdr, b := k.call("POST", "/v1/deploy_templates", body, "X-OpenStack-Ironic-API-Version", "1.54")
	if code != 405 || faultstring(t, b) != "The API version does not allow deploy templates" {
		t.Errorf("create at 1.54: %d %s", code, b)
	}
	code, hdr, b = k.call("POST", "/v1/deploy_templates", body)
	if code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	id := mustJSON(t, b)["uuid"].(string)
	if hdr.Get("Location") != k.URL+"/v1/deploy_templates/"+id {
		t.Errorf("Location %q", hdr.Get("Location"))
	}
	if strings.Contains(string(b), "sekrit") {
		t.Errorf("a secret step argument came back: %s", b)
	}
	k.stop()
	k = startKiln(t, db)
	code, _, b = k.call("GET", "/v1/deploy_templates/CUSTOM_A", "")
	if code != 200 || mustJSON(t, b)["uuid"] != id || strings.Contains(string(b), "sekrit") || !strings.Contains(string(b), `"token":"******"`) {
		t.Errorf("after restart: %d %s", code, b)
	}
}
