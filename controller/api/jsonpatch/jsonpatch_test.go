package jsonpatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// decode parses a JSON object the way the API does (UseNumber).
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

// canon re-encodes a value with sorted keys for comparison.
func canon(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

const nodeDoc = `{
	"uuid": "816cf2f8-b1ea-4bb6-a4b6-df6a24d567e4",
	"name": "node-1",
	"description": null,
	"driver_info": {"redfish_address": "https://10.0.0.1", "redfish_system_id": "/redfish/v1/Systems/1"},
	"properties": {"cpus": 8, "memory_mb": 16384, "capabilities": "boot_mode:uefi"},
	"instance_info": {},
	"extra": {"a/b": 1, "m~n": 2, "tags": ["x", "y"]},
	"traits": [],
	"automated_clean": null
}`

func TestApply(t *testing.T) {
	cases := []struct {
		name  string
		doc   string
		patch string
		want  string // "" = error expected
		err   string // substring of the error
	}{
		{"add nested key", nodeDoc, `[{"op":"add","path":"/driver_info/redfish_username","value":"admin"}]`, "", ""},
		{"replace nested", `{"driver_info":{"ipmi_address":"1.2.3.4"}}`,
			`[{"op":"replace","path":"/driver_info/ipmi_address","value":"5.6.7.8"}]`,
			`{"driver_info":{"ipmi_address":"5.6.7.8"}}`, ""},
		{"add replaces existing key", `{"p":{"capabilities":"a"}}`,
			`[{"op":"add","path":"/p/capabilities","value":"boot_mode:uefi"}]`, `{"p":{"capabilities":"boot_mode:uefi"}}`, ""},
		{"add object value", `{"instance_info":{}}`,
			`[{"op":"add","path":"/instance_info/root_device","value":{"size":">= 10","rotational":false}}]`,
			`{"instance_info":{"root_device":{"rotational":false,"size":">= 10"}}}`, ""},
		{"remove nested", `{"driver_info":{"a":1,"b":2}}`, `[{"op":"remove","path":"/driver_info/a"}]`, `{"driver_info":{"b":2}}`, ""},
		{"remove root key", `{"a":1,"b":2}`, `[{"op":"remove","path":"/a"}]`, `{"b":2}`, ""},
		{"numbers stay exact", `{"p":{}}`, `[{"op":"add","path":"/p/big","value":12345678901234567890}]`,
			`{"p":{"big":12345678901234567890}}`, ""},
		{"null value", `{"a":1}`, `[{"op":"replace","path":"/a","value":null}]`, `{"a":null}`, ""},
		{"escape ~1", `{"extra":{"a/b":1}}`, `[{"op":"replace","path":"/extra/a~1b","value":3}]`, `{"extra":{"a/b":3}}`, ""},
		{"escape ~0", `{"extra":{"m~n":1}}`, `[{"op":"remove","path":"/extra/m~0n"}]`, `{"extra":{}}`, ""},
		{"escape ~01 is ~1 not /", `{"e":{}}`, `[{"op":"add","path":"/e/~01","value":true}]`, `{"e":{"~1":true}}`, ""},
		{"empty key", `{"e":{}}`, `[{"op":"add","path":"/e/","value":1}]`, `{"e":{"":1}}`, ""},
		{"array insert", `{"a":["x","z"]}`, `[{"op":"add","path":"/a/1","value":"y"}]`, `{"a":["x","y","z"]}`, ""},
		{"array insert at end index", `{"a":["x"]}`, `[{"op":"add","path":"/a/1","value":"y"}]`, `{"a":["x","y"]}`, ""},
		{"array append dash", `{"a":["x"]}`, `[{"op":"add","path":"/a/-","value":"y"}]`, `{"a":["x","y"]}`, ""},
		{"array remove", `{"a":["x","y","z"]}`, `[{"op":"remove","path":"/a/1"}]`, `{"a":["x","z"]}`, ""},
		{"array replace", `{"a":["x","y"]}`, `[{"op":"replace","path":"/a/0","value":"w"}]`, `{"a":["w","y"]}`, ""},
		{"nested in array", `{"a":[{"k":1}]}`, `[{"op":"add","path":"/a/0/j","value":2}]`, `{"a":[{"j":2,"k":1}]}`, ""},
		{"move", `{"a":{"x":1},"b":{}}`, `[{"op":"move","from":"/a/x","path":"/b/y"}]`, `{"a":{},"b":{"y":1}}`, ""},
		{"move within array", `{"a":[1,2,3]}`, `[{"op":"move","from":"/a/0","path":"/a/-"}]`, `{"a":[2,3,1]}`, ""},
		{"move onto itself", `{"a":{"x":1}}`, `[{"op":"move","from":"/a/x","path":"/a/x"}]`, `{"a":{"x":1}}`, ""},
		{"copy", `{"a":{"x":[1]},"b":{}}`, `[{"op":"copy","from":"/a/x","path":"/b/x"},{"op":"add","path":"/b/x/-","value":2}]`,
			`{"a":{"x":[1]},"b":{"x":[1,2]}}`, ""},
		{"test passes", `{"a":{"n":1,"s":"x","l":[1,{"k":null}]}}`,
			`[{"op":"test","path":"/a","value":{"l":[1.0,{"k":null}],"s":"x","n":1e0}}]`, `{"a":{"l":[1,{"k":null}],"n":1,"s":"x"}}`, ""},
		{"replace whole doc", `{"a":1}`, `[{"op":"replace","path":"","value":{"b":2}}]`, `{"b":2}`, ""},
		{"ops apply in order", `{"a":{}}`, `[{"op":"add","path":"/a/b","value":{}},{"op":"add","path":"/a/b/c","value":1},{"op":"remove","path":"/a/b/c"}]`,
			`{"a":{"b":{}}}`, ""},

		{"test fails", `{"a":1}`, `[{"op":"test","path":"/a","value":2}]`, "", `test failed`},
		{"test type differs", `{"a":1}`, `[{"op":"test","path":"/a","value":"1"}]`, "", `test failed`},
		{"replace missing", `{"a":{}}`, `[{"op":"replace","path":"/a/x","value":1}]`, "", `no value at "/a/x" to replace`},
		{"remove missing", `{"a":{}}`, `[{"op":"remove","path":"/a/x"}]`, "", `no value at "/a/x"`},
		{"add missing parent", `{"a":{}}`, `[{"op":"add","path":"/a/x/y","value":1}]`, "", `no value at "/a/x"`},
		{"add into string", `{"a":"s"}`, `[{"op":"add","path":"/a/x","value":1}]`, "", `not an object or array`},
		{"array index out of range", `{"a":[1]}`, `[{"op":"add","path":"/a/2","value":1}]`, "", `out of range`},
		{"array leading zero", `{"a":[1,2]}`, `[{"op":"replace","path":"/a/01","value":1}]`, "", `bad array index`},
		{"array negative", `{"a":[1,2]}`, `[{"op":"remove","path":"/a/-1"}]`, "", `bad array index`},
		{"array dash only for add", `{"a":[1]}`, `[{"op":"remove","path":"/a/-"}]`, "", `only appends`},
		{"array huge index", `{"a":[1]}`, `[{"op":"remove","path":"/a/99999999999999999999999"}]`, "", `out of range`},
		{"bad escape", `{"a":1}`, `[{"op":"remove","path":"/a~2"}]`, "", `bad escape`},
		{"no leading slash", `{"a":1}`, `[{"op":"remove","path":"a"}]`, "", `does not start with /`},
		{"remove root", `{"a":1}`, `[{"op":"remove","path":""}]`, "", `whole document`},
		{"root must stay object", `{"a":1}`, `[{"op":"replace","path":"","value":[1]}]`, "", `must remain a JSON object`},
		{"move into own child", `{"a":{"b":{}}}`, `[{"op":"move","from":"/a","path":"/a/b/c"}]`, "", `own child`},
		{"move missing source", `{"a":{}}`, `[{"op":"move","from":"/a/x","path":"/a/y"}]`, "", `no value at "/a/x"`},
		{"failure after success", `{"a":{}}`, `[{"op":"add","path":"/a/x","value":1},{"op":"remove","path":"/a/nope"}]`, "",
			`Couldn't apply patch operation 1 (remove "/a/nope")`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := decode(t, c.doc)
			before := canon(t, doc)
			ops, err := ParseOps([]byte(c.patch))
			if err != nil {
				// Bad pointers are refused by ParseOps already; Apply must
				// refuse them too when ops come from elsewhere.
				if c.err == "" || json.Unmarshal([]byte(c.patch), &ops) != nil {
					t.Fatalf("ParseOps: %v", err)
				}
			}
			got, err := Apply(doc, ops)
			if after := canon(t, doc); after != before {
				t.Errorf("input modified:\n%s\n%s", before, after)
			}
			if c.err != "" {
				var pe *Error
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &pe) {
					t.Fatalf("err = %v, want *Error containing %q", err, c.err)
				}
				if got != nil {
					t.Errorf("result %v returned with an error", got)
				}
				if pe.Op == "" || !strings.Contains(err.Error(), pe.Op) {
					t.Errorf("error %q does not name the op", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if c.want != "" {
				if g, w := canon(t, got), canon(t, decode(t, c.want)); g != w {
					t.Errorf("got  %s\nwant %s", g, w)
				}
			}
		})
	}
}

// TestApplyNoAliasing checks that the result shares no container with the
// input or with the ops, so later edits of one cannot leak into the other.
func TestApplyNoAliasing(t *testing.T) {
	doc := decode(t, nodeDoc)
	val := map[string]any{"k": []any{"v"}}
	ops := []Op{
		{Op: OpAdd, Path: "/instance_info/x", Value: val},
		{Op: OpCopy, From: "/extra/tags", Path: "/extra/tags2"},
	}
	out, err := Apply(doc, ops)
	if err != nil {
		t.Fatal(err)
	}
	out["properties"].(map[string]any)["cpus"] = "changed"
	out["instance_info"].(map[string]any)["x"].(map[string]any)["k"].([]any)[0] = "changed"
	out["extra"].(map[string]any)["tags2"].([]any)[0] = "changed"
	out["extra"].(map[string]any)["tags"].([]any)[1] = "changed"
	if doc["properties"].(map[string]any)["cpus"] != json.Number("8") {
		t.Error("result aliases the input's properties")
	}
	if val["k"].([]any)[0] != "v" {
		t.Error("result aliases the op value")
	}
	tags := out["extra"].(map[string]any)["tags"].([]any)
	if tags[0] != "x" {
		t.Error("copy aliases its source")
	}
	if doc["extra"].(map[string]any)["tags"].([]any)[1] != "y" {
		t.Error("result aliases the input's extra.tags")
	}
}

func TestApplyFloatDocs(t *testing.T) {
	// A document decoded without UseNumber works too, and test compares
	// numbers by value across representations.
	var doc map[string]any
	if err := json.Unmarshal([]byte(`{"p":{"cpus":8,"ratio":0.5}}`), &doc); err != nil {
		t.Fatal(err)
	}
	ops, err := ParseOps([]byte(`[{"op":"test","path":"/p/cpus","value":8.0},{"op":"test","path":"/p/ratio","value":5e-1},{"op":"replace","path":"/p/cpus","value":16}]`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Apply(doc, ops)
	if err != nil {
		t.Fatal(err)
	}
	if got := canon(t, out); got != `{"p":{"cpus":16,"ratio":0.5}}` {
		t.Errorf("got %s", got)
	}
	for _, c := range []struct {
		a, b any
		eq   bool
	}{
		{json.Number("1e2"), 100.0, true},
		{json.Number("1e999"), json.Number("1e999"), false}, // beyond float64: Inf equals nothing
		{json.Number("1e-999"), 0.0, true},                  // underflows to 0 like a float would
		{json.Number("12345678901234567891"), json.Number("12345678901234567890"), false},
		{int64(3), json.Number("3.0"), true},
		{json.Number("x"), json.Number("x"), false},
		{nil, false, false},
		{map[string]any{"a": nil}, map[string]any{"b": nil}, false},
		{[]any{1.0}, []any{1.0, 2.0}, false},
	} {
		if got := equal(c.a, c.b); got != c.eq {
			t.Errorf("equal(%v, %v) = %v, want %v", c.a, c.b, got, c.eq)
		}
	}
}

func TestParseOps(t *testing.T) {
	cases := []struct {
		body string
		n    int    // ops expected
		err  string // substring; "" = success
	}{
		{`[]`, 0, ""},
		{` [ {"op":"add","path":"/a","value":1} ] `, 1, ""},
		{`[{"op":"remove","path":"/a","value":1,"extra":true}]`, 1, ""}, // unused members ignored
		{`[{"op":"add","path":"/a","value":null}]`, 1, ""},
		{`[{"op":"move","from":"/a","path":"/b"},{"op":"copy","from":"/a","path":"/c"},{"op":"test","path":"/a","value":[1]}]`, 3, ""},
		{`{"op":"add","path":"/a","value":1}`, 0, "must be a JSON array"},
		{`null`, 0, "must be a JSON array"},
		{`"[]"`, 0, "must be a JSON array"},
		{``, 0, "not valid JSON"},
		{`[{"op":"add","path":"/a","value":1}] x`, 0, "after the JSON value"},
		{`[{"op":"add","path":"/a","value":1}][]`, 0, "after the JSON value"},
		{`[1]`, 0, "operation 0 must be a JSON object"},
		{`[{"op":"add","path":"/a","value":1}, "x"]`, 0, "operation 1 must be a JSON object"},
		{`[{"path":"/a"}]`, 0, `missing "op"`},
		{`[{"op":"frobnicate","path":"/a"}]`, 0, `unknown op "frobnicate"`},
		{`[{"op":"ADD","path":"/a","value":1}]`, 0, `unknown op`},
		{`[{"op":1,"path":"/a"}]`, 0, `"op" must be a string, not a number`},
		{`[{"op":"remove"}]`, 0, `missing "path"`},
		{`[{"op":"remove","path":["/a"]}]`, 0, `"path" must be a string, not an array`},
		{`[{"op":"remove","path":"a"}]`, 0, `does not start with /`},
		{`[{"op":"remove","path":"/a~"}]`, 0, `bad escape`},
		{`[{"op":"add","path":"/a"}]`, 0, `needs a "value"`},
		{`[{"op":"test","path":"/a"}]`, 0, `needs a "value"`},
		{`[{"op":"move","path":"/a"}]`, 0, `missing "from"`},
		{`[{"op":"copy","path":"/a","from":null}]`, 0, `"from" must be a string, not null`},
		{`[{"op":"remove","path":"/a","from":5}]`, 0, `"from" must be a string`},
		{`[{"op":"copy","path":"/a","from":"b"}]`, 0, `from: JSON pointer`},
	}
	for _, c := range cases {
		ops, err := ParseOps([]byte(c.body))
		if c.err == "" {
			if err != nil || len(ops) != c.n {
				t.Errorf("ParseOps(%s) = %d ops, %v; want %d ops", c.body, len(ops), err, c.n)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("ParseOps(%s) error = %v, want %q", c.body, err, c.err)
		}
	}
	ops, err := ParseOps([]byte(`[{"op":"add","path":"/p/n","value":1.50}]`))
	if err != nil || ops[0].Value != json.Number("1.50") {
		t.Errorf("value = %#v, %v; want json.Number 1.50", ops, err)
	}
}

// ironicNode are rules shaped like Ironic's node PATCH.
var ironicNode = Rules{
	Allowed:  []string{"automated_clean", "description", "driver_info", "extra", "instance_info", "name", "properties", "traits"},
	ReadOnly: []string{"uuid", "driver_internal_info", "provision_state"},
	Ops:      []string{OpAdd, OpReplace, OpRemove},
	Defaults: map[string]any{"extra": map[string]any{}, "properties": map[string]any{}},
}

func TestValidate(t *testing.T) {
	doc := decode(t, nodeDoc)
	cases := []struct {
		patch string
		err   string
	}{
		{`[{"op":"add","path":"/extra/k","value":1},{"op":"replace","path":"/name","value":"n2"}]`, ""},
		{`[{"op":"add","path":"/description","value":"d"}]`, ""}, // existing root, even if null
		{`[{"op":"remove","path":"/properties"}]`, ""},
		{`[{"op":"replace","path":"/uuid","value":"x"}]`, "Cannot patch /uuid: '/uuid' is read-only"},
		{`[{"op":"add","path":"/driver_internal_info/x","value":1}]`, "read-only"},
		{`[{"op":"replace","path":"/power_state","value":"power on"}]`,
			"Cannot patch /power_state. Only the following can be updated: automated_clean, description, driver_info, extra, instance_info, name, properties, traits"},
		{`[{"op":"add","path":"/extra/x","value":1},{"op":"add","path":"/bogus","value":1}]`,
			"Cannot patch /bogus. Only the following can be updated"},
		{`[{"op":"replace","path":"","value":{}}]`, "the whole resource cannot be patched"},
		{`[{"op":"test","path":"/name","value":"node-1"}]`, `Operation "test" is not supported`},
	}
	for _, c := range cases {
		ops, err := ParseOps([]byte(c.patch))
		if err != nil {
			t.Fatalf("ParseOps(%s): %v", c.patch, err)
		}
		err = Validate(doc, ops, ironicNode)
		if c.err == "" {
			if err != nil {
				t.Errorf("Validate(%s): %v", c.patch, err)
			}
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Validate(%s) = %v, want %q", c.patch, err, c.err)
		}
	}

	// A new root key is refused (add, and the destination of move/copy)
	// even when Allowed would allow it.
	open := Rules{ReadOnly: []string{"uuid"}}
	for _, p := range []string{
		`[{"op":"add","path":"/new","value":1}]`,
		`[{"op":"copy","from":"/extra","path":"/new"}]`,
		`[{"op":"move","from":"/extra","path":"/new"}]`,
	} {
		ops, _ := ParseOps([]byte(p))
		err := Validate(doc, ops, open)
		if err == nil || err.Error() != "Adding a new attribute (/new) to the root of the resource is not allowed" {
			t.Errorf("Validate(%s) = %v", p, err)
		}
	}
	// move and copy may not take from a read-only field.
	ops, _ := ParseOps([]byte(`[{"op":"copy","from":"/uuid","path":"/extra/u"}]`))
	if err := Validate(doc, ops, open); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("copy from read-only: %v", err)
	}
}

func TestApplyRules(t *testing.T) {
	doc := decode(t, nodeDoc)
	before := canon(t, doc)
	ops, err := ParseOps([]byte(`[
		{"op":"remove","path":"/extra"},
		{"op":"remove","path":"/name"},
		{"op":"add","path":"/properties/root_device","value":{"name":"s== /dev/sda"}},
		{"op":"remove","path":"/properties"},
		{"op":"add","path":"/driver_info/redfish_password","value":"pw"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := ApplyRules(doc, ops, ironicNode)
	if err != nil {
		t.Fatal(err)
	}
	if canon(t, doc) != before {
		t.Error("input modified")
	}
	if got := canon(t, out["extra"]); got != `{}` {
		t.Errorf("removed extra = %s, want its default {}", got)
	}
	if got := canon(t, out["properties"]); got != `{}` {
		t.Errorf("removed properties = %s, want {}", got)
	}
	if v, ok := out["name"]; !ok || v != nil {
		t.Errorf("removed name = %v (present %v), want null", v, ok)
	}
	if out["driver_info"].(map[string]any)["redfish_password"] != "pw" {
		t.Error("driver_info not patched")
	}
	// Defaults are copied, not shared.
	out["extra"].(map[string]any)["x"] = 1
	if len(ironicNode.Defaults["extra"].(map[string]any)) != 0 {
		t.Error("ApplyRules shares the default value")
	}
	// Remove then re-add a root in one patch keeps the new value.
	ops, _ = ParseOps([]byte(`[{"op":"remove","path":"/extra"},{"op":"add","path":"/extra","value":{"z":1}}]`))
	out, err = ApplyRules(doc, ops, ironicNode)
	if err != nil || canon(t, out["extra"]) != `{"z":1}` {
		t.Errorf("re-add: %v %v", out["extra"], err)
	}
	// A refused patch and a failing patch both return errors and no result.
	for _, p := range []string{`[{"op":"replace","path":"/uuid","value":"x"}]`, `[{"op":"remove","path":"/extra/nope"}]`} {
		ops, _ = ParseOps([]byte(p))
		if out, err := ApplyRules(doc, ops, ironicNode); err == nil || out != nil {
			t.Errorf("ApplyRules(%s) = %v, %v; want error", p, out, err)
		}
	}
	if canon(t, doc) != before {
		t.Error("input modified")
	}
}

func TestRootFields(t *testing.T) {
	ops := []Op{
		{Op: OpAdd, Path: "/driver_info/x"}, {Op: OpRemove, Path: "/extra"}, {Op: OpAdd, Path: "/driver_info/y"},
		{Op: OpMove, From: "/instance_info/a", Path: "/extra/a"}, {Op: OpCopy, From: "/name", Path: "/extra/b"},
		{Op: OpRemove, Path: ""}, {Op: OpRemove, Path: "/a~1b/c"},
	}
	got := strings.Join(RootFields(ops), ",")
	if want := "driver_info,extra,instance_info,a/b"; got != want {
		t.Errorf("RootFields = %s, want %s", got, want)
	}
}

func TestPointerRoundTrip(t *testing.T) {
	for _, tok := range []string{"", "a", "a/b", "~", "~1", "/~/", "-", "0"} {
		toks, err := parsePointer("/" + escapeToken(tok) + "/" + escapeToken(tok))
		if err != nil || len(toks) != 2 || toks[0] != tok || toks[1] != tok {
			t.Errorf("round trip %q: %q %v", tok, toks, err)
		}
	}
	if !bytes.Equal([]byte(escapeToken("a~/b")), []byte("a~0~1b")) {
		t.Error("escapeToken")
	}
}
