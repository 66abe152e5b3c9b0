package jsonscan

import (
	"fmt"
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
