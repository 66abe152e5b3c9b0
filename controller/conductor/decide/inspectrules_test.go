package decide

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/proto"
)

// TestInventoryRunsStoredAndFileRules: the rules stored through the API
// (carried by InventoryRead) run with Config's file rules, by priority and
// stored first among equals, and a failing stored rule fails inspection.
func TestInventoryRunsStoredAndFileRules(t *testing.T) {
	file, err := inspectrules.Parse([]byte(`
- {uuid: file-10, priority: 10, actions: [{op: extend-attribute, args: {path: /extra/order, value: file-10}}]}
- {uuid: file-5, priority: 5, actions: [{op: extend-attribute, args: {path: /extra/order, value: file-5}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	stored := func(t *testing.T, docs ...string) *inspectrules.Set {
		t.Helper()
		var rules []proto.InspectionRule
		for _, d := range docs {
			var r proto.InspectionRule
			if err := json.Unmarshal([]byte(d), &r); err != nil {
				t.Fatal(err)
			}
			rules = append(rules, r)
		}
		s, err := inspectrules.FromStored(rules)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	inv, _ := json.Marshal(map[string]any{"cpu": map[string]any{"count": 4, "architecture": "x86_64"},
		"memory": map[string]any{"physical_mb": 8192}, "interfaces": []any{map[string]any{"name": "eth0", "mac_address": "52:54:00:aa:bb:cc"}}})
	for _, tc := range []struct {
		name   string
		file   *inspectrules.Set
		stored *inspectrules.Set
		order  []string // /extra/order after; nil: the inspection fails
	}{
		{"file only", file, nil, []string{"file-10", "file-5"}},
		{"stored only", nil, stored(t, `{"uuid":"s-7","priority":7,"actions":[{"op":"extend-attribute","args":{"path":"/extra/order","value":"s-7"}}]}`), []string{"s-7"}},
		{"merged", file, stored(t,
			`{"uuid":"s-10","priority":10,"actions":[{"op":"extend-attribute","args":{"path":"/extra/order","value":"s-10"}}]}`,
			`{"uuid":"s-7","priority":7,"conditions":[{"op":"gt","args":{"values":["{inventory[memory][physical_mb]}",4096]}}],"actions":[{"op":"extend-attribute","args":{"path":"/extra/order","value":"s-7"}}]}`,
			`{"uuid":"s-skip","priority":6,"conditions":[{"op":"lt","args":{"values":["{inventory[memory][physical_mb]}",4096]}}],"actions":[{"op":"extend-attribute","args":{"path":"/extra/order","value":"s-skip"}}]}`),
			[]string{"s-10", "file-10", "s-7", "file-5"}},
		{"stored rule fails", file, stored(t, `{"uuid":"s-fail","priority":1,"actions":[{"op":"fail","args":{"msg":"no such vendor"}}]}`), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node(proto.StateInspectWait, proto.StateManageable)
			in := input(t, n, withAgent(flowstate.State{InspectionPending: true}), "direct")
			in.Config.InspectionRules = tc.file
			got, _ := after(t, in, Step(in, InventoryRead{Raw: inv, Rules: tc.stored}))
			if tc.order == nil {
				wantState(t, got, proto.StateInspectFailed, "Inspection of node "+nodeID+": inspection rule s-fail: no such vendor")
				return
			}
			wantState(t, got, proto.StateManageable, "")
			var order []string
			for _, v := range got.Extra["order"].([]any) {
				order = append(order, v.(string))
			}
			if !slices.Equal(order, tc.order) {
				t.Errorf("rules ran in order %v, want %v", order, tc.order)
			}
		})
	}
}
