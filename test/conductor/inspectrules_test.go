package conductor_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/proto"
)

// TestInspectionRulesRunAfterInspection: the operator's rules see what the
// inspection found (properties already merged) and set fields; a fail
// rule fails the inspection with its message; a rule that would change a
// known node's driver fails it too, saying so.
func TestInspectionRulesRunAfterInspection(t *testing.T) {
	rules, err := inspectrules.Parse([]byte(`
- uuid: big-memory
  conditions:
    - {op: gt, args: {values: ["{node.properties[memory_mb]}", 32768]}}
  actions:
    - {op: set-attribute, args: {path: /resource_class, value: baremetal-large}}
    - {op: set-capability, args: {name: boot_mode, value: "{inventory[boot][current_boot_mode]}"}}
    - {op: set-plugin-data, args: {path: classified, value: large}}
- uuid: no-tiny
  conditions:
    - {op: lt, args: {values: ["{inventory[cpu][count]}", 4]}}
  actions:
    - {op: fail, args: {msg: "only {inventory[cpu][count]} CPUs"}}
- uuid: wrong-driver
  conditions:
    - {op: eq, args: {values: ["{inventory[cpu][count]}", 6]}}
  actions:
    - {op: set-attribute, args: {path: /driver, value: ipmi}}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := startController(t, controllerOpts{rules: rules})
	inventory := func(cpus int, mac string) map[string]any {
		return map[string]any{
			"cpu":        map[string]any{"count": cpus, "architecture": "x86_64"},
			"memory":     map[string]any{"total": int64(64) << 30, "physical_mb": 65536},
			"disks":      []any{map[string]any{"name": "/dev/vda", "size": int64(100) << 30}},
			"interfaces": []any{map[string]any{"name": "eth0", "mac_address": mac}},
			"boot":       map[string]any{"current_boot_mode": "uefi", "pxe_interface": mac},
		}
	}
	for _, tc := range []struct {
		name, mac string
		cpus      int
		state     proto.ProvisionState
		lastError string
	}{
		{"rules set fields", "52:54:00:00:31:01", 16, proto.StateManageable, ""},
		{"fail rule", "52:54:00:00:31:02", 2, proto.StateInspectFailed, "inspection rule no-tiny: only 2 CPUs"},
		{"driver change refused", "52:54:00:00:31:03", 6, proto.StateInspectFailed, "changed [driver] of a known node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &machine{}
			uuid := c.enroll("rules-"+tc.mac[len(tc.mac)-2:], tc.mac, nil, m)
			c.provision(uuid, map[string]any{"target": "manage"})
			c.waitState(uuid, proto.StateManageable, 10*time.Second)
			m.cfg.Inspect = true
			m.cfg.Inventory = inventory(tc.cpus, tc.mac)
			c.provision(uuid, map[string]any{"target": "inspect"})
			n := c.waitState(uuid, tc.state, 20*time.Second)
			if tc.lastError != "" {
				if le, _ := n["last_error"].(string); !strings.Contains(le, tc.lastError) {
					t.Fatalf("last_error %q, want it to contain %q", le, tc.lastError)
				}
				if n["driver"] != "scripted-hardware" {
					t.Errorf("driver changed to %v by a failed inspection", n["driver"])
				}
				return
			}
			props := n["properties"].(map[string]any)
			if n["resource_class"] != "baremetal-large" || props["capabilities"] != "boot_mode:uefi" || props["cpus"] != float64(16) {
				t.Errorf("after the rules: resource_class %v, properties %v", n["resource_class"], props)
			}
			if _, inv := c.call("GET", "/v1/nodes/"+uuid+"/inventory", nil); !strings.Contains(fmt.Sprint(inv["plugin_data"]), "classified:large") {
				t.Errorf("plugin data: %v", inv["plugin_data"])
			}
		})
	}
}
