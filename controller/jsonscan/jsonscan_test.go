package jsonscan

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

func TestMembers(t *testing.T) {
	type kv struct{ k, v string }
	for _, tc := range []struct {
		doc  string
		want []kv
		bad  bool
	}{
		{doc: `{}`},
		{doc: `{"a":1,"b":"x"}`, want: []kv{{"a", "1"}, {"b", `"x"`}}},
		{doc: `{"a":"q\"}\\","b":null}`, want: []kv{{"a", `"q\"}\\"`}, {"b", "null"}}},
		{doc: `{"a":"\\\\","b":true}`, want: []kv{{"a", `"\\\\"`}, {"b", "true"}}},
		{doc: `{"a":{"x":[1,{"y":"]}"}],"z":{}},"b":[]}`, want: []kv{{"a", `{"x":[1,{"y":"]}"}],"z":{}}`}, {"b", "[]"}}},
		{doc: `{"a":-1.5e+21}`, want: []kv{{"a", "-1.5e+21"}}},
		{doc: `{"a": 1}`, bad: true},
		{doc: `{"a":1`, bad: true},
		{doc: `{"a":1 }`, bad: true},
		{doc: `{"a":[1, 2]}`, bad: true},
		{doc: `{"a":"x}`, bad: true},
		{doc: `{"a":{"b":1}`, bad: true},
		{doc: `{"a\"b":1}`, bad: true},
		{doc: `[1]`, bad: true},
		{doc: `{"a":1}x`, bad: true},
		{doc: ``, bad: true},
	} {
		var got []kv
		err := Members([]byte(tc.doc), func(k, v []byte) { got = append(got, kv{string(k), string(v)}) })
		if tc.bad {
			if err == nil {
				t.Errorf("Members(%s) = %v, want an error", tc.doc, got)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Members(%s) = %v, %v; want %v", tc.doc, got, err, tc.want)
		}
	}
}

// TestLined: ToLined keeps the members, Lines finds them again, the lined
// form is the same JSON, and what is not lined is refused.
func TestLined(t *testing.T) {
	for _, doc := range []string{
		`{}`, `{"a":1}`, `{"a":"x\ny","b":{"c":[1,{"d":"}\n"}]},"e":null}`, `{"a":"\\","b":"q\""}`,
	} {
		var want []string
		if err := Members([]byte(doc), func(k, v []byte) { want = append(want, string(k)+"="+string(v)) }); err != nil {
			t.Fatal(err)
		}
		lined, err := ToLined([]byte(doc))
		if err != nil {
			t.Fatalf("ToLined(%s): %v", doc, err)
		}
		var got []string
		if err := Lines(lined, func(k, v []byte) { got = append(got, string(k)+"="+string(v)) }); err != nil {
			t.Fatalf("Lines(%q): %v", lined, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Lines(%q) = %v, want %v", lined, got, want)
		}
		var a, b any
		if json.Unmarshal([]byte(doc), &a) != nil || json.Unmarshal(lined, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("ToLined(%s) = %q: not the same JSON", doc, lined)
		}
	}
	for _, bad := range []string{`{"a":1}`, `{"a":1,"b":2}`, "{\n\"a\":1", "{\n\"a\":1\n\"b\":2}", "{\n\"a\":}", "{\nx:1}", "{\n\"a\"1}", `[]`, ``} {
		if err := Lines([]byte(bad), func(k, v []byte) {}); err == nil {
			t.Errorf("Lines(%q) accepted it", bad)
		}
	}
}
