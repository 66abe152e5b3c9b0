package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
)

// TestInspectionRulesMatchAPIReference creates, lists, shows and updates
// inspection rules with the API reference's requests and compares the
// answers' shapes with its responses; a sensitive rule shows null
// conditions and actions.
func TestInspectionRulesMatchAPIReference(t *testing.T) {
	srv, _ := stepsServer(t)
	decode := func(name string) map[string]any {
		var want map[string]any
		if err := json.Unmarshal([]byte(apiRefSample(t, name)), &want); err != nil {
			t.Fatal(err)
		}
		return want
	}
	code, created := call(t, srv, "POST", "/v1/inspection_rules", "1.96", apiRefSample(t, "inspection-rule-create-request.json"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, created)
	}
	sameShape(t, "create", decode("inspection-rule-create-response.json"), created)
	if created["conditions"] != nil || created["actions"] != nil || created["sensitive"] != true || created["priority"] != float64(100) {
		t.Errorf("sensitive rule shown: %v", created)
	}
	plain := `{"description":"Set properties on discovered data","priority":50,
		"conditions":[{"op":"is-true","args":{"value":"{inventory[cpu][count]}"}}],
		"actions":[{"op":"set-attribute","args":{"path":"/properties/cpus","value":"{inventory[cpu][count]}"}},
		{"op":"set-attribute","args":{"path":"/properties/memory_mb","value":"{inventory[memory][physical_mb]}"}},
		{"op":"set-attribute","args":{"path":"/properties/cpu_arch","value":"{inventory[cpu][architecture]}"}}]}`
	code, shown := call(t, srv, "POST", "/v1/inspection_rules", "1.96", plain)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, shown)
	}
	id := shown["uuid"].(string)
	for _, c := range []struct{ path, sample string }{
		{"/v1/inspection_rules/" + id, "inspection-rule-show-response.json"},
		{"/v1/inspection_rules", "inspection-rule-list-response.json"},
		{"/v1/inspection_rules?detail=True", "inspection-rule-detail-response.json"},
	} {
		code, got := call(t, srv, "GET", c.path, "1.96", "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", c.path, code, got)
		}
		sameShape(t, c.path, decode(c.sample), got)
	}
	code, patched := call(t, srv, "PATCH", "/v1/inspection_rules/"+id, "1.96", apiRefSample(t, "inspection-rule-update-request.json"))
	if code != http.StatusOK {
		t.Fatalf("patch: %d %v", code, patched)
	}
	sameShape(t, "patch", decode("inspection-rule-update-response.json"), patched)
	if patched["priority"] != float64(75) || len(patched["actions"].([]any)) != 4 || patched["updated_at"] == nil {
		t.Errorf("patched: %v", patched)
	}
}

// TestInspectionRulesAPI: gating, validation naming the operation at
// fault, the sensitive flag, filters, sorting, paging and deletes, each in
// Ironic's status and error format.
func TestInspectionRulesAPI(t *testing.T) {
	srv, _ := stepsServer(t)
	act := `{"op":"add-trait","args":{"name":"CUSTOM_A"}}`
	var ids []string
	for i, prio := range []int{30, 10, 20} {
		code, body := call(t, srv, "POST", "/v1/inspection_rules", "1.96",
			fmt.Sprintf(`{"description":"r%d","priority":%d,"actions":[%s]}`, i, prio, act))
		if code != http.StatusCreated {
			t.Fatalf("create: %d %v", code, body)
		}
		ids = append(ids, body["uuid"].(string))
		if i == 0 {
			a0 := body["actions"].([]any)[0].(map[string]any)
			if _, ok := a0["loop"]; ok || body["phase"] != "main" || len(body["conditions"].([]any)) != 0 {
				t.Errorf("defaults: %v", body)
			}
		}
	}
	sens := "aaaaaaaa-1111-4222-8333-444444444444"
	code, body := call(t, srv, "POST", "/v1/inspection_rules", "1.96", `{"uuid":"`+sens+`","sensitive":true,"priority":5,
		"conditions":[{"op":"eq","args":{"values":["{item}",1]},"loop":[1,2]}],"actions":[{"op":"set-attribute","args":{"path":"/driver_info/redfish_password","value":"s3cret"}}]}`)
	if code != http.StatusCreated || strings.Contains(fmt.Sprint(body), "s3cret") {
		t.Fatalf("sensitive create: %d %v", code, body)
	}
	for _, c := range []struct {
		name, method, path, version, body string
		code                              int
		fault                             string
	}{
		{"list below 1.96", "GET", "/v1/inspection_rules", "1.95", "", 404, "The API version does not allow inspection rules"},
		{"show below 1.96", "GET", "/v1/inspection_rules/" + ids[0], "1.95", "", 404, "does not allow inspection rules"},
		{"create below 1.96", "POST", "/v1/inspection_rules", "1.95", `{"actions":[` + act + `]}`, 405, "does not allow inspection rules"},
		{"delete all below 1.96", "DELETE", "/v1/inspection_rules", "1.95", "", 405, "does not allow inspection rules"},
		{"no actions", "POST", "/v1/inspection_rules", "1.96", `{"priority":1}`, 400, "'actions' is a required property"},
		{"empty actions", "POST", "/v1/inspection_rules", "1.96", `{"actions":[]}`, 400, "too short"},
		{"unknown field", "POST", "/v1/inspection_rules", "1.96", `{"actions":[` + act + `],"name":"x"}`, 400, "'name' was unexpected"},
		{"unknown action", "POST", "/v1/inspection_rules", "1.96", `{"actions":[` + act + `,{"op":"reboot","args":{}}]}`, 400, `action 2: unknown action "reboot"`},
		{"unknown condition", "POST", "/v1/inspection_rules", "1.96", `{"conditions":[{"op":"bigger","args":[1,2]}],"actions":[` + act + `]}`, 400, `condition 1: unknown condition "bigger"`},
		{"missing argument", "POST", "/v1/inspection_rules", "1.96", `{"actions":[{"op":"set-attribute","args":{"path":"/extra/a"}}]}`, 400, `argument "value" is required`},
		{"no args", "POST", "/v1/inspection_rules", "1.96", `{"actions":[{"op":"log"}]}`, 400, "'args' is a required property"},
		{"misspelt key", "POST", "/v1/inspection_rules", "1.96", `{"conditions":[{"op":"is-true","args":{"value":1},"mutliple":"all"}],"actions":[` + act + `]}`, 400, "mutliple"},
		{"api-call refused", "POST", "/v1/inspection_rules", "1.96", `{"actions":[{"op":"api-call","args":{"url":"http://x"}}]}`, 400, "no outbound HTTP calls"},
		{"negative priority", "POST", "/v1/inspection_rules", "1.96", `{"priority":-1,"actions":[` + act + `]}`, 400, "Priority must be between 0 and 9999"},
		{"priority too high", "POST", "/v1/inspection_rules", "1.96", `{"priority":10000,"actions":[` + act + `]}`, 400, "Priority must be between 0 and 9999"},
		{"other phase", "POST", "/v1/inspection_rules", "1.96", `{"phase":"late","actions":[` + act + `]}`, 400, `phase "late"`},
		{"description too long", "POST", "/v1/inspection_rules", "1.96", `{"description":"` + strings.Repeat("d", 256) + `","actions":[` + act + `]}`, 400, "too long"},
		{"duplicate uuid", "POST", "/v1/inspection_rules", "1.96", `{"uuid":"` + sens + `","actions":[` + act + `]}`, 409, "already exists"},
		{"not a uuid", "GET", "/v1/inspection_rules/rule-1", "1.96", "", 400, "Expected a UUID but received rule-1."},
		{"no detail path", "GET", "/v1/inspection_rules/detail", "1.96", "", 400, "Expected a UUID but received detail."},
		{"unknown rule", "GET", "/v1/inspection_rules/bbbbbbbb-1111-4222-8333-444444444444", "1.96", "", 404, "Inspection rule bbbbbbbb-1111-4222-8333-444444444444 could not be found."},
		{"unset sensitive", "PATCH", "/v1/inspection_rules/" + sens, "1.96", `[{"op":"replace","path":"/sensitive","value":false}]`, 400, "cannot have the sensitive flag unset"},
		{"patch an invalid action", "PATCH", "/v1/inspection_rules/" + ids[0], "1.96", `[{"op":"add","path":"/actions/-","value":{"op":"explode","args":{}}}]`, 400, `action 2: unknown action "explode"`},
		{"patch remove actions", "PATCH", "/v1/inspection_rules/" + ids[0], "1.96", `[{"op":"remove","path":"/actions"}]`, 400, "actions"},
		{"patch uuid", "PATCH", "/v1/inspection_rules/" + ids[0], "1.96", `[{"op":"replace","path":"/uuid","value":"` + sens + `"}]`, 400, "/uuid"},
		{"sort by actions", "GET", "/v1/inspection_rules?sort_key=actions", "1.96", "", 400, "invalid field for sorting"},
		{"detail and fields", "GET", "/v1/inspection_rules?detail=True&fields=uuid", "1.96", "", 400, "Can not specify ?detail=True and fields"},
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
	// A refused change left the rules as they were.
	if _, got := call(t, srv, "GET", "/v1/inspection_rules/"+ids[0], "1.96", ""); len(got["actions"].([]any)) != 1 {
		t.Errorf("a refused patch changed the rule: %v", got)
	}
	if _, got := call(t, srv, "GET", "/v1/inspection_rules/"+sens, "1.96", ""); got["sensitive"] != true || got["conditions"] != nil || got["actions"] != nil {
		t.Errorf("sensitive rule after refused unset: %v", got)
	}
	// A sensitive rule hides conditions and actions in lists too, even
	// when asked for them.
	_, list := call(t, srv, "GET", "/v1/inspection_rules?fields=uuid,actions,conditions", "1.96", "")
	for _, r := range list["inspection_rules"].([]any) {
		m := r.(map[string]any)
		if m["uuid"] == sens && (m["actions"] != nil || m["conditions"] != nil) {
			t.Errorf("sensitive rule listed with its actions: %v", m)
		}
		if m["uuid"] == ids[0] && m["actions"] == nil {
			t.Errorf("plain rule listed without its actions: %v", m)
		}
		if _, ok := m["priority"]; ok {
			t.Errorf("fields=uuid,actions,conditions shows priority: %v", m)
		}
	}
	// Sorting by priority and paging.
	_, page := call(t, srv, "GET", "/v1/inspection_rules?sort_key=priority&sort_dir=desc&limit=2", "1.96", "")
	items := page["inspection_rules"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["uuid"] != ids[0] || items[1].(map[string]any)["uuid"] != ids[2] {
		t.Fatalf("first page by priority: %v", page)
	}
	next, _ := page["next"].(string)
	if !strings.Contains(next, "marker="+ids[2]) || !strings.Contains(next, "sort_key=priority") {
		t.Fatalf("next link %q", next)
	}
	_, page = call(t, srv, "GET", "/v1/inspection_rules?sort_key=priority&sort_dir=desc&limit=2&marker="+ids[2], "1.96", "")
	items = page["inspection_rules"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["uuid"] != ids[1] || items[1].(map[string]any)["uuid"] != sens {
		t.Errorf("second page by priority: %v", page)
	}
	// The phase filter.
	for phase, n := range map[string]int{"main": 4, "other": 0} {
		_, got := call(t, srv, "GET", "/v1/inspection_rules?phase="+phase, "1.96", "")
		if l := got["inspection_rules"].([]any); len(l) != n {
			t.Errorf("phase=%s: %d rules, want %d", phase, len(l), n)
		}
	}
	// GET /v1/ links the collection from 1.96.
	for v, want := range map[string]bool{"1.95": false, "1.96": true} {
		code, root := call(t, srv, "GET", "/v1/", v, "")
		if _, ok := root["inspection_rules"]; code != http.StatusOK || ok != want {
			t.Errorf("GET /v1/ at %s: inspection_rules linked %v, want %v", v, ok, want)
		}
	}
	// DELETE one, then DELETE all.
	if code, body := call(t, srv, "DELETE", "/v1/inspection_rules/"+ids[1], "1.96", ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %v", code, body)
	}
	if code, _ := call(t, srv, "GET", "/v1/inspection_rules/"+ids[1], "1.96", ""); code != http.StatusNotFound {
		t.Errorf("deleted rule: %d", code)
	}
	if code, body := call(t, srv, "DELETE", "/v1/inspection_rules", "1.96", ""); code != http.StatusNoContent {
		t.Fatalf("delete all: %d %v", code, body)
	}
	if _, got := call(t, srv, "GET", "/v1/inspection_rules", "1.96", ""); len(got["inspection_rules"].([]any)) != 0 {
		t.Errorf("after delete all: %v", got)
	}
}

// TestInspectionRuleSecretsMasked: a rule that is not sensitive still
// shows "******" for the values it writes to secret attributes (by path,
// by position, in loop items) and for secret keys; writing the masked
// actions back keeps the stored values.
func TestInspectionRuleSecretsMasked(t *testing.T) {
	srv, st := stepsServer(t)
	code, body := call(t, srv, "POST", "/v1/inspection_rules", "1.96", `{"actions":[
		{"op":"set-attribute","args":{"path":"/driver_info/redfish_password","value":"pw-by-path"}},
		{"op":"set-attribute","args":["driver_info.ipmi_password","pw-by-position"]},
		{"op":"set-attribute","args":{"path":"{item[path]}","value":"{item[value]}"},
		 "loop":[{"path":"/driver_info/ipmi_username","value":"admin"},{"path":"/driver_info/snmp_community","value":"pw-in-loop"}]},
		{"op":"set-plugin-data","args":{"path":"creds","value":{"password":"pw-by-key","user":"u"}}},
		{"op":"set-attribute","args":{"path":"/extra/site","value":"lab"}}]}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	id := body["uuid"].(string)
	for _, path := range []string{"/v1/inspection_rules/" + id, "/v1/inspection_rules?detail=True"} {
		_, got := call(t, srv, "GET", path, "1.96", "")
		s := fmt.Sprint(got)
		if strings.Contains(s, "pw-") || !strings.Contains(s, "******") || !strings.Contains(s, "lab") || !strings.Contains(s, "admin") {
			t.Errorf("GET %s shows %s", path, s)
		}
	}
	if strings.Contains(fmt.Sprint(body), "pw-") {
		t.Errorf("create answer shows a secret: %v", body)
	}
	// Write the masked actions back, as a client that read them would.
	masked, _ := json.Marshal(body["actions"])
	code, got := call(t, srv, "PATCH", "/v1/inspection_rules/"+id, "1.96", `[{"op":"replace","path":"/actions","value":`+string(masked)+`},{"op":"add","path":"/description","value":"d"}]`)
	if code != http.StatusOK || got["description"] != "d" {
		t.Fatalf("patch: %d %v", code, got)
	}
	rs, err := store.NewResources(st, store.InspectionRuleResource)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := rs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(stored.Actions)
	for _, secret := range []string{"pw-by-path", "pw-by-position", "pw-in-loop", "pw-by-key"} {
		if !strings.Contains(string(b), secret) {
			t.Errorf("stored actions lost %s after writing the masked ones back: %s", secret, b)
		}
	}
	if strings.Contains(string(b), "******") {
		t.Errorf("stored actions hold the mask: %s", b)
	}
}
