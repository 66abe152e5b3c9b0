package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestDeployTemplatesMatchAPIReference creates, lists, shows and updates a
// deploy template with the API reference's requests and compares each
// answer's shape with the reference's response.
func TestDeployTemplatesMatchAPIReference(t *testing.T) {
	srv := chassisServer(t)
	code, created := call(t, srv, "POST", "/v1/deploy_templates", "1.55", apiRefSample(t, "deploy-template-create-request.json"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, created)
	}
	sameShape(t, "create", apiRefJSON(t, "deploy-template-create-response.json"), created)
	if created["name"] != "CUSTOM_HYPERTHREADING_ON" {
		t.Errorf("created name %v", created["name"])
	}
	id := created["uuid"].(string)
	getShapes(t, srv, "1.95", []shapeCase{
		{"/v1/deploy_templates/" + id, "deploy-template-show-response.json"},
		{"/v1/deploy_templates/CUSTOM_HYPERTHREADING_ON", "deploy-template-show-response.json"},
		{"/v1/deploy_templates", "deploy-template-list-response.json"},
		{"/v1/deploy_templates/detail", "deploy-template-detail-response.json"},
		{"/v1/deploy_templates?detail=True", "deploy-template-detail-response.json"},
	})
	code, patched := call(t, srv, "PATCH", "/v1/deploy_templates/"+id, "1.55", apiRefSample(t, "deploy-template-update-request.json"))
	if code != http.StatusOK {
		t.Fatalf("patch: %d %v", code, patched)
	}
	sameShape(t, "patch", apiRefJSON(t, "deploy-template-update-response.json"), patched)
	if patched["name"] != "CUSTOM_HT_ON" || patched["updated_at"] == nil {
		t.Errorf("patched: %v", patched)
	}
	// The old name is gone, the new one finds it.
	if code, _ := call(t, srv, "GET", "/v1/deploy_templates/CUSTOM_HYPERTHREADING_ON", "1.55", ""); code != http.StatusNotFound {
		t.Errorf("old name: %d", code)
	}
	if code, got := call(t, srv, "GET", "/v1/deploy_templates/CUSTOM_HT_ON", "1.55", ""); code != http.StatusOK || got["uuid"] != id {
		t.Errorf("new name: %d %v", code, got)
	}
}

// TestDeployTemplateRules: Ironic's validation, microversion gating and
// errors; a refused request changes nothing.
func TestDeployTemplateRules(t *testing.T) {
	srv := chassisServer(t)
	const id = "1be26c0b-03f2-4d2e-ae87-c02d7f33c124"
	step := `{"interface":"bios","step":"apply_configuration","args":{"password":"hunter2","settings":[]},"priority":"150"}`
	code, body := call(t, srv, "POST", "/v1/deploy_templates", "1.55", `{"uuid":"`+id+`","name":"CUSTOM_A","steps":[`+step+`],"extra":{"k":"v"}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	steps := body["steps"].([]any)
	s0 := steps[0].(map[string]any)
	// A priority given as digits is a number; secrets in args are masked.
	if s0["priority"] != float64(150) || s0["args"].(map[string]any)["password"] != "******" {
		t.Errorf("stored step: %v", s0)
	}
	if code, body := call(t, srv, "POST", "/v1/deploy_templates", "1.55", `{"name":"HW_CPU_X86_AVX2","steps":[`+step+`]}`); code != http.StatusCreated {
		t.Errorf("standard trait as name: %d %v", code, body)
	}
	okStep := `{"interface":"deploy","step":"s","args":{},"priority":10}`
	for _, c := range []struct {
		name, method, path, version, body string
		code                              int
		fault                             string
	}{
		{"list below 1.55", "GET", "/v1/deploy_templates", "1.54", "", 404, "The API version does not allow deploy templates"},
		{"get below 1.55", "GET", "/v1/deploy_templates/" + id, "1.54", "", 404, "does not allow deploy templates"},
		{"create below 1.55", "POST", "/v1/deploy_templates", "1.54", `{"name":"CUSTOM_B","steps":[` + okStep + `]}`, 405, "does not allow deploy templates"},
		{"delete below 1.55", "DELETE", "/v1/deploy_templates/" + id, "1.54", "", 405, "does not allow deploy templates"},
		{"name not a trait", "POST", "/v1/deploy_templates", "1.55", `{"name":"hyperthreading","steps":[` + okStep + `]}`, 400, "must be a standard trait or match ^CUSTOM_"},
		{"unknown standard trait", "POST", "/v1/deploy_templates", "1.55", `{"name":"HW_NOT_A_TRAIT","steps":[` + okStep + `]}`, 400, "must be a standard trait"},
		{"no name", "POST", "/v1/deploy_templates", "1.55", `{"steps":[` + okStep + `]}`, 400, "'name' is a required property"},
		{"no steps", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B"}`, 400, "'steps' is a required property"},
		{"empty steps", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B","steps":[]}`, 400, "is too short"},
		{"step without args", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B","steps":[{"interface":"deploy","step":"s","priority":1}]}`, 400, "'args' is a required property"},
		{"step with an unknown key", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B","steps":[{"interface":"deploy","step":"s","args":{},"priority":1,"order":2}]}`, 400, "'order' was unexpected"},
		{"unknown interface", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B","steps":[{"interface":"boot","step":"s","args":{},"priority":1}]}`, 400, "'boot' is not one of"},
		{"negative priority", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B","steps":[{"interface":"deploy","step":"s","args":{},"priority":-1}]}`, 400, "priority"},
		{"priority not digits", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B","steps":[{"interface":"deploy","step":"s","args":{},"priority":"1a"}]}`, 400, "does not match"},
		{"empty step name", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B","steps":[{"interface":"deploy","step":"","args":{},"priority":1}]}`, 400, "too short"},
		{"duplicate steps", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B","steps":[` + okStep + `,` + okStep + `]}`, 400, "Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: interface: deploy, step: s."},
		{"unknown field", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_B","steps":[` + okStep + `],"owner":"x"}`, 400, "'owner' was unexpected"},
		{"duplicate name", "POST", "/v1/deploy_templates", "1.55", `{"name":"CUSTOM_A","steps":[` + okStep + `]}`, 409, "A deploy template with name CUSTOM_A already exists."},
		{"duplicate UUID", "POST", "/v1/deploy_templates", "1.55", `{"uuid":"` + id + `","name":"CUSTOM_B","steps":[` + okStep + `]}`, 409, "A deploy template with UUID " + id + " already exists."},
		{"rename onto another", "PATCH", "/v1/deploy_templates/" + id, "1.55", `[{"op":"replace","path":"/name","value":"HW_CPU_X86_AVX2"}]`, 409, "A deploy template with name HW_CPU_X86_AVX2 already exists."},
		{"patch a bad name", "PATCH", "/v1/deploy_templates/CUSTOM_A", "1.55", `[{"op":"replace","path":"/name","value":"bad"}]`, 400, "must be a standard trait"},
		{"patch a bad step", "PATCH", "/v1/deploy_templates/CUSTOM_A", "1.55", `[{"op":"add","path":"/steps/-","value":{"interface":"deploy","step":"s"}}]`, 400, "'args' is a required property"},
		{"remove steps", "PATCH", "/v1/deploy_templates/CUSTOM_A", "1.55", `[{"op":"remove","path":"/steps"}]`, 400, "steps"},
		{"patch uuid", "PATCH", "/v1/deploy_templates/CUSTOM_A", "1.55", `[{"op":"replace","path":"/uuid","value":"1be26c0b-03f2-4d2e-ae87-c02d7f33c125"}]`, 400, "Cannot patch /uuid"},
		{"unknown name", "GET", "/v1/deploy_templates/CUSTOM_NONE", "1.55", "", 404, "Deploy template CUSTOM_NONE could not be found."},
		{"not a name or UUID", "GET", "/v1/deploy_templates/a%20b", "1.55", "", 400, "Expected a logical name or UUID but received a b."},
		{"sort by steps", "GET", "/v1/deploy_templates?sort_key=steps", "1.55", "", 400, "invalid field for sorting"},
		{"unknown field in fields", "GET", "/v1/deploy_templates?fields=uuid,owner", "1.55", "", 400, "are not valid"},
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
	code, got := call(t, srv, "GET", "/v1/deploy_templates/"+id, "1.55", "")
	if code != http.StatusOK || got["name"] != "CUSTOM_A" || got["updated_at"] != nil || len(got["steps"].([]any)) != 1 {
		t.Errorf("after the refusals: %d %v", code, got)
	}

	// A patch adds a step (priority 0: it disables the driver's) and an extra.
	code, got = call(t, srv, "PATCH", "/v1/deploy_templates/CUSTOM_A", "1.55",
		`[{"op":"add","path":"/steps/-","value":{"interface":"raid","step":"delete_configuration","args":{},"priority":0}},{"op":"add","path":"/extra/x","value":1}]`)
	if code != http.StatusOK || len(got["steps"].([]any)) != 2 || got["extra"].(map[string]any)["x"] != float64(1) {
		t.Fatalf("patch: %d %v", code, got)
	}
	if code, body := call(t, srv, "DELETE", "/v1/deploy_templates/CUSTOM_A", "1.55", ""); code != http.StatusNoContent {
		t.Fatalf("delete by name: %d %v", code, body)
	}
	if code, _ := call(t, srv, "GET", "/v1/deploy_templates/"+id, "1.55", ""); code != http.StatusNotFound {
		t.Errorf("deleted template: %d", code)
	}
}

// TestDeployTemplatesPaging pages by name through next links.
func TestDeployTemplatesPaging(t *testing.T) {
	srv := chassisServer(t)
	for i := range 5 {
		body := fmt.Sprintf(`{"name":"CUSTOM_T%d","steps":[{"interface":"deploy","step":"s","args":{},"priority":1}]}`, 4-i)
		if code, b := call(t, srv, "POST", "/v1/deploy_templates", "1.55", body); code != http.StatusCreated {
			t.Fatalf("create: %d %v", code, b)
		}
	}
	var names []string
	next := "/v1/deploy_templates?limit=2&sort_key=name&fields=name"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("no end to the pages")
		}
		code, page := call(t, srv, "GET", strings.TrimPrefix(next, srv.URL), "1.55", "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", next, code, page)
		}
		for _, d := range page["deploy_templates"].([]any) {
			m := d.(map[string]any)
			if _, ok := m["uuid"]; ok {
				t.Errorf("fields=name shows %v", m)
			}
			names = append(names, m["name"].(string))
		}
		next, _ = page["next"].(string)
	}
	if fmt.Sprint(names) != "[CUSTOM_T0 CUSTOM_T1 CUSTOM_T2 CUSTOM_T3 CUSTOM_T4]" {
		t.Errorf("paged by name: %v", names)
	}
}
