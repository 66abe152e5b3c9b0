package conductor_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/proto"
)

// TestStoredInspectionRulesRunWithTheFile: rules stored through
// /v1/inspection_rules run on an in-band inspection with the file's, by
// priority and stored first among equals; once deleted through the API
// the next inspection runs the file's alone.
func TestStoredInspectionRulesRunWithTheFile(t *testing.T) {
	file, err := inspectrules.Parse([]byte(`
- uuid: file-10
  priority: 10
  actions:
    - {op: extend-attribute, args: {path: /extra/order, value: file-10}}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := startController(t, controllerOpts{rules: file})
	at196 := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, c.URL+path, strings.NewReader(body))
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.96")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, r := range []string{
		`{"description":"big memory","priority":50,
		  "conditions":[{"op":"gt","args":{"values":["{node.properties[memory_mb]}",32768]}}],
		  "actions":[{"op":"add-trait","args":{"name":"CUSTOM_BIG_MEMORY"}},
		             {"op":"extend-attribute","args":{"path":"/extra/order","value":"stored-50"}}]}`,
		`{"priority":10,"sensitive":true,"actions":[{"op":"extend-attribute","args":{"path":"/extra/order","value":"stored-10"}}]}`,
		`{"priority":5,"conditions":[{"op":"lt","args":{"values":["{inventory[cpu][count]}",2]}}],
		  "actions":[{"op":"fail","args":{"msg":"too small"}}]}`,
	} {
		if code, body := at196("POST", "/v1/inspection_rules", r); code != http.StatusCreated {
			t.Fatalf("create rule: %d %v", code, body)
		}
	}
	inspect := func(name, mac string) map[string]any {
		t.Helper()
		m := &machine{}
		uuid := c.enroll(name, mac, nil, m)
		c.provision(uuid, map[string]any{"target": "manage"})
		c.waitState(uuid, proto.StateManageable, 10*time.Second)
		m.cfg.Inspect = true
		m.cfg.Inventory = map[string]any{
			"cpu":        map[string]any{"count": 8, "architecture": "x86_64"},
			"memory":     map[string]any{"total": int64(64) << 30, "physical_mb": 65536},
			"disks":      []any{map[string]any{"name": "/dev/vda", "size": int64(100) << 30}},
			"interfaces": []any{map[string]any{"name": "eth0", "mac_address": mac}},
			"boot":       map[string]any{"current_boot_mode": "uefi", "pxe_interface": mac},
		}
		c.provision(uuid, map[string]any{"target": "inspect"})
		return c.waitState(uuid, proto.StateManageable, 20*time.Second)
	}
	order := func(n map[string]any) []string {
		var out []string
		l, _ := n["extra"].(map[string]any)["order"].([]any)
		for _, v := range l {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	n := inspect("stored-1", "52:54:00:00:32:01")
	if got, want := order(n), []string{"stored-50", "stored-10", "file-10"}; !slices.Equal(got, want) {
		t.Errorf("rules ran in order %v, want %v", got, want)
	}
	if traits := fmt.Sprint(n["traits"]); !strings.Contains(traits, "CUSTOM_BIG_MEMORY") {
		t.Errorf("traits %s: the stored rule's trait is missing", traits)
	}
	if code, body := at196("DELETE", "/v1/inspection_rules", ""); code != http.StatusNoContent {
		t.Fatalf("delete all: %d %v", code, body)
	}
	n = inspect("stored-2", "52:54:00:00:32:02")
	if got, want := order(n), []string{"file-10"}; !slices.Equal(got, want) {
		t.Errorf("after deleting the stored rules: order %v, want %v", got, want)
	}
	if traits := fmt.Sprint(n["traits"]); strings.Contains(traits, "CUSTOM_BIG_MEMORY") {
		t.Errorf("traits %s after the rule was deleted", traits)
	}
}
