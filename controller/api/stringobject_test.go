package api

import (
	"encoding/json"
	"maps"
	"testing"
	"unicode/utf8"
)

// TestStringObject: a body stringObject takes gives what jsonObject gives;
// every other body — escapes, other values, broken JSON — is left to
// jsonObject.
func TestStringObject(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"callback_url":"http://10.0.0.5:9999","agent_version":"10.1","agent_token":"tok"}`, true},
		// Python's json.dumps, as ironic-python-agent sends it.
		{`{"callback_url": "http://10.0.0.5:9999", "agent_version": "10.1", "agent_token": "tok"}`, true},
		{" \n{ \"a\" :\t\"x\" ,\r\n\"b\":\"\" } \n", true},
		{`{}`, true},
		{` { } `, true},
		{`{"a":"1","a":"2"}`, true}, // the last wins, as in a map
		{`{"a":"é ☃"}`, true},
		{`{"a":"x\"y"}`, false},
		{`{"a":"\u0041"}`, false},
		{`{"a\u0041":"x"}`, false},
		{"{\"a\":\"x\ty\"}", false}, // a raw control character: invalid JSON
		{`{"a":1}`, false},
		{`{"a":null}`, false},
		{`{"a":{"b":"c"}}`, false},
		{`{"a":"x",}`, false},
		{`{"a":"x"}}`, false},
		{`{"a":"x"} x`, false},
		{`{"a":"x"`, false},
		{`{"a" "x"}`, false},
		{`{"a":"x" "b":"y"}`, false},
		{`["a"]`, false},
		{`"a"`, false},
		{``, false},
		{`{`, false},
		{`{"a`, false},
	} {
		got, ok := stringObject([]byte(tc.body))
		if ok != tc.ok {
			t.Errorf("stringObject(%q) ok = %v, want %v", tc.body, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		want, err := jsonObject([]byte(tc.body), "heartbeat")
		if err != nil {
			t.Errorf("stringObject took %q, which jsonObject refuses: %v", tc.body, err)
			continue
		}
		if !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Errorf("stringObject(%q) = %q, jsonObject gives %q", tc.body, got, want)
		}
	}
	for _, tc := range []struct {
		raw   string
		plain bool
	}{
		{`"x"`, true}, {`""`, true}, {`"x\"y"`, false}, {`"x`, false}, {`x`, false}, {`"x"y`, false}, {"\"\x01\"", false},
	} {
		if got := plainString([]byte(tc.raw)); got != tc.plain {
			t.Errorf("plainString(%q) = %v, want %v", tc.raw, got, tc.plain)
		}
	}
}

// FuzzStringObject: whatever body an agent sends, a body stringObject
// takes is one jsonObject takes too, with the same members; it never
// panics. Run with `go test -fuzz FuzzStringObject ./controller/api/`.
func FuzzStringObject(f *testing.F) {
	for _, s := range []string{
		`{"callback_url":"http://10.0.0.5:9999","agent_version":"10.1","agent_token":"tok"}`,
		`{"callback_url": "http://10.0.0.5:9999", "agent_version": "10.1"}`,
		`{}`, `{"a":"x\"y"}`, `{"a":1}`, `{"a":"x",}`, `{"a":"1","a":"2"}`, `{"a`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) { // readBody refuses it before
			return
		}
		got, ok := stringObject(body)
		if !ok {
			return
		}
		want, err := jsonObject(body, "heartbeat")
		if err != nil {
			t.Fatalf("stringObject took %q, which jsonObject refuses: %v", body, err)
		}
		if !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Fatalf("stringObject(%q) = %q, jsonObject gives %q", body, got, want)
		}
	})
}
