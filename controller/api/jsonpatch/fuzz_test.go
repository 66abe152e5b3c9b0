package jsonpatch

import (
	"encoding/json"
	"testing"
)

const fuzzDoc = `{
	"uuid": "u", "name": "n", "description": null, "traits": ["a", "b"],
	"driver_info": {"ipmi_address": "1.2.3.4", "a/b": {"m~n": [1, 2, {"x": null}]}},
	"properties": {"cpus": 8, "capabilities": "boot_mode:uefi", "list": [[], {}]},
	"extra": {}, "instance_info": {"root_device": {"size": ">= 4"}}
}`

// fuzzPaths and fuzzValues feed ops built from raw bytes when the input is
// not a parseable patch, so that random bytes still reach Apply.
var fuzzPaths = []string{
	"", "/", "/uuid", "/name", "/traits", "/traits/0", "/traits/1", "/traits/2", "/traits/-", "/traits/01",
	"/driver_info", "/driver_info/ipmi_address", "/driver_info/a~1b", "/driver_info/a~1b/m~0n",
	"/driver_info/a~1b/m~0n/2/x", "/driver_info/a~1b/m~0n/-", "/driver_info/a~1b/m~0n/9", "/driver_info/a~2",
	"/properties/cpus/x", "/properties/list/0/-", "/properties/list/1/k", "/extra/new", "/extra/new/deeper",
	"/instance_info/root_device/size", "/nope", "nope", "/description/x",
}

var fuzzValues = []any{nil, true, "s", json.Number("1"), json.Number("1e999"), 2.5,
	map[string]any{"k": []any{json.Number("3")}}, []any{}, map[string]any{}}

var fuzzOps = []string{OpAdd, OpRemove, OpReplace, OpMove, OpCopy, OpTest, "bogus"}

func opsFromBytes(data []byte) []Op {
	var ops []Op
	for i := 0; i+3 < len(data) && len(ops) < 16; i += 4 {
		ops = append(ops, Op{
			Op:    fuzzOps[int(data[i])%len(fuzzOps)],
			Path:  fuzzPaths[int(data[i+1])%len(fuzzPaths)],
			From:  fuzzPaths[int(data[i+2])%len(fuzzPaths)],
			Value: fuzzValues[int(data[i+3])%len(fuzzValues)],
		})
	}
	return ops
}

// FuzzApply checks on random patches of a node-like document that Apply
// never panics, never modifies its input, and returns either an error and no
// document or a document that still encodes to JSON. ApplyRules is held to
// the same.
func FuzzApply(f *testing.F) {
	for _, s := range []string{
		`[{"op":"add","path":"/driver_info/redfish_address","value":"https://x"}]`,
		`[{"op":"replace","path":"/properties/capabilities","value":"boot_mode:bios"}]`,
		`[{"op":"remove","path":"/driver_info/a~1b/m~0n/1"},{"op":"add","path":"/traits/-","value":"c"}]`,
		`[{"op":"move","from":"/driver_info/a~1b","path":"/extra/moved"},{"op":"copy","from":"/extra/moved","path":"/extra/copied"}]`,
		`[{"op":"test","path":"/properties/cpus","value":8.0},{"op":"remove","path":"/extra"}]`,
		`[{"op":"replace","path":"","value":{"a":[1,{"b":null}]}}]`,
		`[{"op":"move","from":"/traits/0","path":"/traits/-"}]`,
		"\x00\x05\x01\x06\x03\x0e\x02\x07\x04\x0f\x10\x01",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ops, err := ParseOps(data)
		if err != nil {
			ops = opsFromBytes(data)
		}
		doc := decode(t, fuzzDoc)
		before := canon(t, doc)

		out, err := Apply(doc, ops)
		check(t, doc, before, out, err)

		rules := Rules{ReadOnly: []string{"uuid"}, Defaults: map[string]any{"extra": map[string]any{}}}
		out, err = ApplyRules(doc, ops, rules)
		check(t, doc, before, out, err)
	})
}

func check(t *testing.T, doc map[string]any, before string, out map[string]any, err error) {
	t.Helper()
	if after := canon(t, doc); after != before {
		t.Fatalf("input modified:\n%s\n%s", before, after)
	}
	if err != nil {
		if out != nil {
			t.Fatalf("result returned with error %v", err)
		}
		if _, ok := err.(*Error); !ok {
			t.Fatalf("error %v (%T) is not *Error", err, err)
		}
		return
	}
	if out == nil {
		t.Fatal("nil result without error")
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("result does not encode: %v", err)
	}
	// Decode as the API does: numbers beyond float64 (1e999) stay json.Number.
	if back := decode(t, string(b)); canon(t, back) != string(b) {
		t.Fatalf("result does not round-trip:\n%s\n%s", b, canon(t, back))
	}
}

// FuzzParseOps checks that ParseOps never panics and that what it accepts is
// well-formed and survives an encode/parse round trip.
func FuzzParseOps(f *testing.F) {
	for _, s := range []string{
		`[]`,
		`[{"op":"add","path":"/a/b","value":{"c":[1,2.5e3,null,true]}}]`,
		`[{"op":"remove","path":"/a~0~1"},{"op":"move","from":"/a","path":"/b"}]`,
		`[{"op":"copy","from":"/x","path":"/y","value":1},{"op":"test","path":"","value":null}]`,
		`{"op":"add"}`, `[1,2]`, `[{"op":5}]`, `[{"op":"add","path":"x"}]`, `[] []`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ops, err := ParseOps(data)
		if err != nil {
			return
		}
		for i, op := range ops {
			switch op.Op {
			case OpAdd, OpRemove, OpReplace, OpMove, OpCopy, OpTest:
			default:
				t.Fatalf("op %d: accepted unknown op %q", i, op.Op)
			}
			if _, err := parsePointer(op.Path); err != nil {
				t.Fatalf("op %d: accepted bad path: %v", i, err)
			}
			if _, err := parsePointer(op.From); err != nil {
				t.Fatalf("op %d: accepted bad from: %v", i, err)
			}
		}
		b, err := json.Marshal(ops)
		if err != nil {
			t.Fatalf("accepted ops do not encode: %v", err)
		}
		again, err := ParseOps(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if len(again) != len(ops) {
			t.Fatalf("round trip: %d ops, want %d", len(again), len(ops))
		}
		for i := range ops {
			if again[i].Op != ops[i].Op || again[i].Path != ops[i].Path || again[i].From != ops[i].From ||
				!equal(again[i].Value, ops[i].Value) && canon(t, again[i].Value) != canon(t, ops[i].Value) {
				t.Fatalf("round trip op %d: %+v != %+v", i, again[i], ops[i])
			}
		}
	})
}
