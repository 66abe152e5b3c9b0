package api_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
)

// TestInspectionRulesServe drives /v1/inspection_rules on a real kiln
// serve (python3-ironicclient 5.0.1 has no inspection rule commands and
// gophercloud v2 no inspection rules client, so over plain HTTP): create,
// list, show, patch, then a discovered machine runs the stored rules with
// the --inspection-rules file's, the password a sensitive stored rule sets
// reaching neither the API nor the log; after DELETE of the collection the
// next machine runs the file's rules alone.
func TestInspectionRulesServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(discoveryRules), 0o600); err != nil {
		t.Fatal(err)
	}
	k := &kiln{Proc: kilnproc.Start(t, kilnBin, filepath.Join(dir, "kiln.db"),
		"--conductor", "rules", "--boot-unknown", "discovery", "--inspection-rules", rules), t: t}
	v := []string{"X-OpenStack-Ironic-API-Version", "1.96"}

	code, hdr, b := k.call("POST", "/v1/inspection_rules", `{"description":"big machines","priority":20,
		"conditions":[{"op":"gt","args":{"values":["{inventory[cpu][count]}",8]}}],
		"actions":[{"op":"add-trait","args":{"name":"CUSTOM_BIG"}},{"op":"set-attribute","args":{"path":"/extra/site","value":"lab"}}]}`, v...)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	big := mustJSON(t, b)
	id := big["uuid"].(string)
	if !strings.HasSuffix(hdr.Get("Location"), "/v1/inspection_rules/"+id) || big["phase"] != "main" || big["priority"] != float64(20) {
		t.Errorf("created: Location %q, %s", hdr.Get("Location"), b)
	}
	code, _, b = k.call("POST", "/v1/inspection_rules", `{"description":"BMC password","sensitive":true,
		"actions":[{"op":"set-attribute","args":{"path":"/driver_info/ipmi_password","value":"stored-s3cret"}}]}`, v...)
	if code != http.StatusCreated || strings.Contains(string(b), "stored-s3cret") {
		t.Fatalf("create sensitive: %d %s", code, b)
	}
	code, _, b = k.call("POST", "/v1/inspection_rules", `{"actions":[{"op":"reboot","args":{}}]}`, v...)
	if code != http.StatusBadRequest || !strings.Contains(faultstring(t, b), `action 1: unknown action "reboot"`) {
		t.Errorf("invalid rule: %d %s", code, b)
	}
	if code, _, b := k.call("GET", "/v1/inspection_rules", ""); code != http.StatusNotFound {
		t.Errorf("list at 1.95: %d %s", code, b)
	}
	code, _, b = k.call("GET", "/v1/inspection_rules?sort_key=priority&sort_dir=desc", "", v...)
	list, _ := mustJSON(t, b)["inspection_rules"].([]any)
	if code != http.StatusOK || len(list) != 2 || list[0].(map[string]any)["uuid"] != id || strings.Contains(string(b), "actions") {
		t.Errorf("list: %d %s", code, b)
	}
	code, _, b = k.call("PATCH", "/v1/inspection_rules/"+id, `[{"op":"replace","path":"/description","value":"more than 8 CPUs"}]`, v...)
	if code != http.StatusOK || mustJSON(t, b)["description"] != "more than 8 CPUs" {
		t.Errorf("patch: %d %s", code, b)
	}
	if code, _, b := k.call("GET", "/v1/inspection_rules/"+id+"?fields=uuid,description", "", v...); code != http.StatusOK || !strings.Contains(string(b), "more than 8 CPUs") || strings.Contains(string(b), "priority") {
		t.Errorf("show with fields: %d %s", code, b)
	}

	discover := func(serial, mac string) map[string]any {
		t.Helper()
		code, _, b := k.call("POST", "/v1/continue_inspection", discoveryInventory("Dell Inc.", serial, "10.20.3.4", mac))
		if code != http.StatusAccepted {
			t.Fatalf("continue_inspection: %d %s", code, b)
		}
		_, _, b = k.call("GET", "/v1/nodes/"+mustJSON(t, b)["uuid"].(string), "")
		return mustJSON(t, b)
	}
	n := discover("S1", "52:54:00:d2:00:01")
	extra, _ := n["extra"].(map[string]any)
	if traits := fmt.Sprint(n["traits"]); !strings.Contains(traits, "CUSTOM_BIG") || !strings.Contains(traits, "CUSTOM_DISCOVERED") || extra["site"] != "lab" {
		t.Errorf("stored and file rules on a discovered machine: traits %s, extra %v", traits, extra)
	}
	// The node's history names the rules that ran, stored and the file's.
	if _, _, b := k.call("GET", "/v1/nodes/"+n["uuid"].(string)+"/history", ""); !strings.Contains(string(b), "lab-bmc") || !strings.Contains(string(b), id) {
		t.Errorf("history does not name the rules: %s", b)
	}
	if strings.Contains(k.Logs(), "stored-s3cret") {
		t.Error("the password a stored rule set reached the log")
	}

	if code, _, b := k.call("DELETE", "/v1/inspection_rules", "", v...); code != http.StatusNoContent {
		t.Fatalf("delete all: %d %s", code, b)
	}
	n = discover("S2", "52:54:00:d2:00:02")
	if traits := fmt.Sprint(n["traits"]); strings.Contains(traits, "CUSTOM_BIG") || !strings.Contains(traits, "CUSTOM_DISCOVERED") {
		t.Errorf("after deleting the stored rules: traits %s", traits)
	}
	if code, _, b := k.call("GET", "/v1/inspection_rules", "", v...); code != http.StatusOK || strings.Contains(string(b), "uuid") {
		t.Errorf("list after delete all: %d %s", code, b)
	}
}
