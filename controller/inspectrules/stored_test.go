package inspectrules

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// apiRule decodes a rule as the API receives it (numbers as json.Number).
func apiRule(t *testing.T, doc string) proto.InspectionRule {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	var r proto.InspectionRule
	if err := d.Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCheckAPIRule: a rule from the API is refused for what a rules file
// would be refused for, and the error names the operation at fault.
func TestCheckAPIRule(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"valid", `{"conditions":[{"op":"gt","args":{"values":["{inventory[cpu][count]}",4]}}],"actions":[{"op":"add-trait","args":{"name":"CUSTOM_X"},"loop":[]}]}`, ""},
		{"list args", `{"conditions":[{"op":"!is-empty","args":["{inventory[disks]}"]}],"actions":[{"op":"set-attribute","args":["/extra/a","b"]}]}`, ""},
		{"looped", `{"conditions":[{"op":"contains","args":{"value":"{item[name]}","regex":"eth"},"loop":"{inventory[interfaces]}","multiple":"all"}],"actions":[{"op":"log","args":{"msg":"{item}"},"loop":[1,2]}]}`, ""},
		{"unknown condition", `{"conditions":[{"op":"bigger","args":{}}],"actions":[{"op":"log","args":{"msg":"x"}}]}`, `condition 1: unknown condition "bigger"`},
		{"unknown action", `{"actions":[{"op":"log","args":{"msg":"x"}},{"op":"reboot","args":{}}]}`, `action 2: unknown action "reboot"`},
		{"missing argument", `{"actions":[{"op":"set-attribute","args":{"path":"/extra/a"}}]}`, `action 1: set-attribute: argument "value" is required`},
		{"unknown argument", `{"actions":[{"op":"add-trait","args":{"name":"CUSTOM_A","color":"red"}}]}`, `unknown argument "color"`},
		{"refused action", `{"actions":[{"op":"api-call","args":{"url":"http://x"}}]}`, "no outbound HTTP calls"},
		{"negated action", `{"actions":[{"op":"!log","args":{"msg":"x"}}]}`, "only conditions can be negated"},
		{"bad multiple", `{"conditions":[{"op":"is-true","args":{"value":"{item}"},"loop":[1],"multiple":"most"}],"actions":[{"op":"log","args":{"msg":"x"}}]}`, "multiple must be any, all, first or last"},
		{"no actions", `{"actions":[]}`, "no actions"},
		{"phase", `{"phase":"late","actions":[{"op":"log","args":{"msg":"x"}}]}`, `phase "late"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(apiRule(t, tc.doc))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestMergeOrder: stored and file rules run by priority, higher first, and
// among equal priorities the stored rules first (Ironic's order), each
// set's own order kept.
func TestMergeOrder(t *testing.T) {
	file, err := Parse([]byte(`
- {uuid: f-low, priority: -5, actions: [{op: extend-attribute, args: {path: /extra/order, value: f-low}}]}
- {uuid: f-mid, priority: 50, actions: [{op: extend-attribute, args: {path: /extra/order, value: f-mid}}]}
- {uuid: f-top, priority: 100, actions: [{op: extend-attribute, args: {path: /extra/order, value: f-top}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rule := func(id string, prio int) proto.InspectionRule {
		return apiRule(t, `{"uuid":"`+id+`","priority":`+itoa(prio)+`,"actions":[{"op":"extend-attribute","args":{"path":"/extra/order","value":"`+id+`"}}]}`)
	}
	stored, err := FromStored([]proto.InspectionRule{rule("s-mid-1", 50), rule("s-top", 200), rule("s-mid-2", 50), rule("s-zero", 0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  *Set
		want []string
	}{
		{"both", Merge(stored, file), []string{"s-top", "f-top", "s-mid-1", "s-mid-2", "f-mid", "s-zero", "f-low"}},
		{"stored only", Merge(stored, nil), []string{"s-top", "s-mid-1", "s-mid-2", "s-zero"}},
		{"file only", Merge(nil, file), []string{"f-top", "f-mid", "f-low"}},
		{"none", Merge(nil, nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode()
			ran, err := tc.set.Apply(Env{Node: n, Inventory: inventory(), Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(ran, ",") != strings.Join(tc.want, ",") {
				t.Errorf("ran %v, want %v", ran, tc.want)
			}
			var order []string
			if l, ok := n.Extra["order"].([]any); ok {
				for _, v := range l {
					order = append(order, v.(string))
				}
			}
			if strings.Join(order, ",") != strings.Join(tc.want, ",") {
				t.Errorf("actions ran in order %v, want %v", order, tc.want)
			}
		})
	}
}

// TestFromStoredRuns: a stored rule's arguments decoded from JSON compare
// as numbers, and an empty action loop is no loop (the action runs once).
func TestFromStoredRuns(t *testing.T) {
	s, err := FromStored([]proto.InspectionRule{apiRule(t, `{"uuid":"big","conditions":[{"op":"gt","args":{"values":["{inventory[memory][physical_mb]}",1024]}}],
		"actions":[{"op":"add-trait","args":{"name":"CUSTOM_BIG"},"loop":[]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	n := newNode()
	if _, err := s.Apply(Env{Node: n, Inventory: inventory(), Log: quiet}); err != nil {
		t.Fatal(err)
	}
	if len(n.Traits) != 1 || n.Traits[0] != "CUSTOM_BIG" {
		t.Errorf("traits %v, want [CUSTOM_BIG]", n.Traits)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
