package inspectrules

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestParseRefusesBadRules(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"not a list", `{op: eq}`, "not a list of rules"},
		{"unknown field", "- actions: [{op: log, args: {msg: x}}]\n  scope: a", "scope"},
		{"no actions", `- conditions: [{op: is-true, args: {value: true}}]`, "no actions"},
		{"unknown condition", `- {conditions: [{op: approx, args: {}}], actions: [{op: log, args: {msg: x}}]}`, `unknown condition "approx"`},
		{"unknown action", `- actions: [{op: reboot}]`, `unknown action "reboot"`},
		{"missing argument", `- actions: [{op: set-attribute, args: {path: /driver}}]`, `argument "value" is required`},
		{"unknown argument", `- actions: [{op: log, args: {msg: x, colour: red}}]`, `unknown argument "colour"`},
		{"negated action", `- actions: [{op: "!log", args: {msg: x}}]`, "only conditions can be negated"},
		{"api-call refused", `- actions: [{op: api-call, args: {url: "http://x"}}]`, "no outbound HTTP calls"},
		{"port actions not yet", `- actions: [{op: set-port-attribute, args: {port_id: a, path: b, value: c}}]`, "not supported yet"},
		{"bad phase", `- {phase: early, actions: [{op: log, args: {msg: x}}]}`, `only "main"`},
		{"bad multiple", `- {conditions: [{op: is-true, args: {value: x}, loop: [1], multiple: most}], actions: [{op: log, args: {msg: x}}]}`, "multiple must be"},
		{"values not a list", `- {conditions: [{op: eq, args: {values: 3}}], actions: [{op: log, args: {msg: x}}]}`, "values must be a list"},
		{"loop not a list", `- actions: [{op: log, args: {msg: x}, loop: 3}]`, "loop must be a list"},
		{"duplicate uuid", "- {uuid: a, actions: [{op: log, args: {msg: x}}]}\n- {uuid: a, actions: [{op: log, args: {msg: x}}]}", "uuid used twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse: err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if s, err := Parse(nil); err != nil || s.Len() != 0 {
		t.Fatalf("empty document: %v, %d rules", err, s.Len())
	}
}

// inventory is the part of an agent inventory the rules below read.
func inventory() map[string]any {
	return map[string]any{
		"bmc_address":   "10.20.0.17",
		"system_vendor": map[string]any{"manufacturer": "Dell Inc.", "product_name": "PowerEdge R640"},
		"cpu":           map[string]any{"count": float64(32), "architecture": "x86_64"},
		"memory":        map[string]any{"physical_mb": float64(65536)},
		"interfaces":    []any{map[string]any{"name": "eno1", "mac_address": "52:54:00:00:00:01"}},
	}
}

func newNode() *proto.Node {
	return &proto.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Driver: "fake-hardware",
		ProvisionState: proto.StateEnroll, DriverInfo: proto.Dict{}, Properties: proto.Dict{},
		Extra: proto.Dict{}, Traits: []string{}}
}

// TestConditions: one rule per case whose action sets extra/hit; the case
// says whether the conditions held.
func TestConditions(t *testing.T) {
	for _, tc := range []struct {
		name, cond string
		holds      bool
	}{
		{"eq strings", `{op: eq, args: {values: ["{inventory[system_vendor][manufacturer]}", "Dell Inc."]}}`, true},
		{"eq differs", `{op: eq, args: {values: ["{inventory[system_vendor][manufacturer]}", "HPE"]}}`, false},
		{"eq number from inventory", `{op: eq, args: {values: ["{inventory[cpu][count]}", 32]}}`, true},
		{"eq force_strings", `{op: eq, args: {values: ["{inventory[cpu][count]}", "32"], force_strings: true}}`, true},
		{"eq list form", `{op: eq, args: ["{node.driver}", fake-hardware]}`, true},
		{"not eq", `{op: "!eq", args: {values: ["{node.driver}", ipmi]}}`, true},
		{"not eq with space", `{op: "! eq", args: {values: ["{node.driver}", fake-hardware]}}`, false},
		{"lt ascending", `{op: lt, args: {values: [16, "{inventory[cpu][count]}", 64]}}`, true},
		{"lt not strict", `{op: lt, args: {values: [32, "{inventory[cpu][count]}"]}}`, false},
		{"gt descending", `{op: gt, args: {values: ["{inventory[memory][physical_mb]}", 32768]}}`, true},
		{"in-net", `{op: in-net, args: {address: "{inventory[bmc_address]}", subnet: 10.20.0.0/24}}`, true},
		{"not in-net", `{op: in-net, args: {address: "{inventory[bmc_address]}", subnet: 10.21.0.0/24}}`, false},
		{"in-net without an address", `{op: in-net, args: {address: "", subnet: 10.20.0.0/24}}`, false},
		{"matches whole", `{op: matches, args: {value: "{inventory[system_vendor][product_name]}", regex: "PowerEdge R6.0"}}`, true},
		{"matches is anchored", `{op: matches, args: {value: "{inventory[system_vendor][product_name]}", regex: "R640"}}`, false},
		{"contains", `{op: contains, args: {value: "{inventory[system_vendor][manufacturer]}", regex: "(?i)dell"}}`, true},
		{"one-of", `{op: one-of, args: {value: "{inventory[cpu][architecture]}", values: [aarch64, x86_64]}}`, true},
		{"is-empty missing field keeps literal", `{op: is-empty, args: {value: "{inventory[nothing]}"}}`, false},
		{"is-empty empty dict", `{op: is-empty, args: {value: "{node.extra}"}}`, true},
		{"is-none", `{op: is-none, args: {value: "{node.name}"}}`, true},
		{"is-true plugin data", `{op: is-true, args: {value: "{plugin_data[auto_discovered]}"}}`, true},
		{"is-true string", `{op: is-true, args: {value: "Yes"}}`, true},
		{"is-false zero", `{op: is-false, args: {value: 0}}`, true},
		{"loop any", `{op: eq, args: {values: ["{inventory[system_vendor][product_name]}", "{item}"]}, loop: [R740, PowerEdge R640]}`, true},
		{"loop all", `{op: eq, args: {values: ["{inventory[system_vendor][product_name]}", "{item}"]}, loop: [R740, PowerEdge R640], multiple: all}`, false},
		{"loop first", `{op: eq, args: {values: ["{inventory[system_vendor][product_name]}", "{item}"]}, loop: [R740, PowerEdge R640], multiple: first}`, false},
		{"loop last", `{op: eq, args: {values: ["{inventory[system_vendor][product_name]}", "{item}"]}, loop: [R740, PowerEdge R640], multiple: last}`, true},
		{"dot on a dictionary does not resolve", `{op: eq, args: {values: ["{inventory.bmc_address}", "10.20.0.17"]}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte("- conditions: [" + tc.cond + "]\n  actions: [{op: set-attribute, args: {path: /extra/hit, value: yes}}]"))
			if err != nil {
				t.Fatal(err)
			}
			n := newNode()
			ran, err := s.Apply(Env{Node: n, Inventory: inventory(), PluginData: map[string]any{"auto_discovered": true}, Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Extra["hit"] == "yes"; got != tc.holds || (len(ran) == 1) != tc.holds {
				t.Fatalf("held = %v (ran %v), want %v", got, ran, tc.holds)
			}
		})
	}
}

func TestActions(t *testing.T) {
	const rules = `
- uuid: dell-bmc
  description: Dell machines in the lab range get the iDRAC driver
  priority: 100
  conditions:
    - op: contains
      args: {value: "{inventory[system_vendor][manufacturer]}", regex: "(?i)dell"}
    - op: in-net
      args: {address: "{inventory[bmc_address]}", subnet: 10.20.0.0/16}
  actions:
    - op: set-attribute
      args: {path: /driver, value: redfish}
    - op: set-attribute
      args: {path: "{item[path]}", value: "{item[value]}"}
      loop:
        - {path: /driver_info/redfish_address, value: "https://{inventory[bmc_address]}"}
        - {path: driver_info.redfish_username, value: root}
    - op: set-attribute
      args:
        path: /properties/hw
        value: {arch: "{inventory[cpu][architecture]}", cpus: "{inventory[cpu][count]}"}
    - op: set-capability
      args: {name: boot_mode, value: uefi}
    - op: add-trait
      args: {name: CUSTOM_DELL}
    - op: extend-attribute
      args: {path: /extra/tags, value: lab, unique: true}
    - op: extend-attribute
      args: {path: /extra/tags, value: lab, unique: true}
    - op: set-plugin-data
      args: {path: enrolled_by, value: dell-bmc}
- description: runs after, so its name wins
  priority: 1
  actions:
    - op: set-attribute
      args: {path: /name, value: "{inventory[system_vendor][product_name]}-{inventory[cpu][count]}"}
    - op: del-attribute
      args: {path: /extra/nothing/here}
    - op: unset-capability
      args: {name: secure_boot}
    - op: remove-trait
      args: {name: CUSTOM_OLD}
`
	s, err := Parse([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	n := newNode()
	n.Properties["capabilities"] = "secure_boot:true,cpu_vt:true"
	n.Traits = []string{"CUSTOM_OLD"}
	plugin := map[string]any{}
	ran, err := s.Apply(Env{Node: n, Inventory: inventory(), PluginData: plugin, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if len(ran) != 2 || ran[0] != "dell-bmc" {
		t.Errorf("ran %v", ran)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"driver", n.Driver, "redfish"},
		{"redfish_address", n.DriverInfo["redfish_address"], "https://10.20.0.17"},
		{"redfish_username", n.DriverInfo["redfish_username"], "root"},
		{"properties/hw", n.Properties["hw"], map[string]any{"arch": "x86_64", "cpus": float64(32)}},
		{"capabilities", n.Properties["capabilities"], "cpu_vt:true,boot_mode:uefi"},
		{"traits", n.Traits, []string{"CUSTOM_DELL"}},
		{"extra/tags", n.Extra["tags"], []any{"lab"}},
		{"name", n.Name, ptr("PowerEdge R640-32")},
		{"plugin data", plugin["enrolled_by"], "dell-bmc"},
		{"provision state untouched", n.ProvisionState, proto.StateEnroll},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

func ptr(s string) *string { return &s }

var quiet = slog.New(slog.DiscardHandler)

// TestFailureLeavesTheNodeAlone: a fail action, an attribute rules may not
// set and an unusable regex each fail the run naming the rule, and the node
// keeps every value it had, even those earlier rules changed.
func TestFailureLeavesTheNodeAlone(t *testing.T) {
	first := "- {uuid: first, priority: 9, actions: [{op: set-attribute, args: {path: /driver, value: ipmi}}]}\n"
	for _, tc := range []struct{ name, rule, want string }{
		{"fail action", `- {uuid: gate, actions: [{op: fail, args: {msg: "no BMC on {inventory[system_vendor][product_name]}"}}]}`, "inspection rule gate: no BMC on PowerEdge R640"},
		{"state is not settable", `- {uuid: state, actions: [{op: set-attribute, args: {path: /provision_state, value: active}}]}`, `inspection rule state: action 1 (set-attribute): node attribute "provision_state" cannot be set`},
		{"bad regex", `- {uuid: re, conditions: [{op: matches, args: {value: x, regex: "("}}], actions: [{op: log, args: {msg: x}}]}`, "inspection rule re: condition 1 (matches): regex"},
		{"extend a string", `- {uuid: ext, actions: [{op: extend-attribute, args: {path: /driver, value: x}}]}`, "driver is not a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(first + tc.rule))
			if err != nil {
				t.Fatal(err)
			}
			n := newNode()
			before := *n
			_, err = s.Apply(Env{Node: n, Inventory: inventory(), Log: quiet})
			var f *Failure
			if !errors.As(err, &f) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a Failure containing %q", err, tc.want)
			}
			if !reflect.DeepEqual(*n, before) {
				t.Fatalf("node changed by a failed run: %+v", *n)
			}
		})
	}
}

// TestSensitiveRulesAreNotLogged: a sensitive rule's log message (which may
// carry credentials) never reaches the log.
func TestSensitiveRulesAreNotLogged(t *testing.T) {
	s, err := Parse([]byte(`
- sensitive: true
  actions:
    - {op: set-attribute, args: {path: /driver_info/ipmi_password, value: hunter2}}
    - {op: log, args: {msg: "password is {node.driver_info[ipmi_password]}", level: warning}}
- actions:
    - {op: log, args: {msg: "vendor {inventory[system_vendor][manufacturer]}"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n := newNode()
	if _, err := s.Apply(Env{Node: n, Inventory: inventory(), Log: slog.New(slog.NewTextHandler(&buf, nil))}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "hunter2") {
		t.Fatalf("secret logged: %s", out)
	}
	if !strings.Contains(out, "vendor Dell Inc.") || !strings.Contains(out, "sensitive rule") {
		t.Fatalf("log lacks the rules' lines: %s", out)
	}
	if n.DriverInfo["ipmi_password"] != "hunter2" {
		t.Fatalf("password not set: %v", n.DriverInfo)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rules.json")
	if err := os.WriteFile(p, []byte(`[{"description": "json works too", "actions": [{"op": "add-trait", "args": {"name": "CUSTOM_X"}}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadFile(p)
	if err != nil || s.Len() != 1 {
		t.Fatalf("LoadFile: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#"), maxFileBytes+10), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("missing file accepted")
	}
}

// FuzzParseAndApply: any document either fails to parse with an error or
// applies without panicking, and a failed application changes nothing.
func FuzzParseAndApply(f *testing.F) {
	for _, s := range []string{
		`- {actions: [{op: set-attribute, args: {path: /driver, value: "{inventory[bmc_address]}"}}]}`,
		`- {conditions: [{op: "!in-net", args: ["{inventory[bmc_address]}", "10.0.0.0/8"]}], actions: [{op: fail, args: [x]}]}`,
		`- {actions: [{op: extend-plugin-data, args: {path: a/b, value: "{item}"}, loop: "{inventory[interfaces]}"}]}`,
		`- {actions: [{op: set-capability, args: {name: "{{x}}", value: "{node.uuid}"}}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		s, err := Parse([]byte(doc))
		if err != nil {
			return
		}
		n := newNode()
		before := *n
		if _, err := s.Apply(Env{Node: n, Inventory: inventory(), Log: slog.New(slog.DiscardHandler)}); err != nil {
			if !reflect.DeepEqual(*n, before) {
				t.Fatalf("failed run changed the node")
			}
		}
	})
}

func TestCopySettableAndDriverChanges(t *testing.T) {
	src, dst := newNode(), newNode()
	src.Driver, src.PowerInterface, src.Name = "ipmi", "ipmitool", ptr("n1")
	src.DriverInfo["ipmi_address"] = "10.0.0.1"
	src.Traits = []string{"CUSTOM_A"}
	src.ProvisionState = proto.StateActive // not something rules may change
	dst.Properties["cpus"] = 4
	CopySettable(dst, src)
	if dst.Driver != "ipmi" || dst.PowerInterface != "ipmitool" || *dst.Name != "n1" || dst.DriverInfo["ipmi_address"] != "10.0.0.1" ||
		!reflect.DeepEqual(dst.Traits, []string{"CUSTOM_A"}) || dst.Properties["cpus"] != nil {
		t.Errorf("settable fields not copied: %+v", dst)
	}
	if dst.ProvisionState != proto.StateEnroll {
		t.Errorf("provision_state copied: %s", dst.ProvisionState)
	}
	if got := DriverChanges(newNode(), src); !reflect.DeepEqual(got, []string{"driver", "power_interface"}) {
		t.Errorf("DriverChanges = %v", got)
	}
	if got := DriverChanges(src, src); got != nil {
		t.Errorf("DriverChanges of a node with itself = %v", got)
	}
}
