package docs

import (
	"strings"
	"testing"
)

func TestParseTranscripts(t *testing.T) {
	doc := "intro\n```console\n$ not run\n```\n```console transcript\n$ a\nA1\nA2\n$ b\n```\n"
	ts := parseTranscripts(doc)
	if len(ts) != 1 || len(ts[0].steps) != 2 {
		t.Fatalf("parsed %+v", ts)
	}
	if s := ts[0].steps[0]; s.cmd != "a" || strings.Join(s.want, "|") != "A1|A2" || s.line != 6 {
		t.Errorf("first step %+v", s)
	}
	if s := ts[0].steps[1]; s.cmd != "b" || len(s.want) != 0 {
		t.Errorf("second step %+v", s)
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		ok        bool
	}{
		{"x", "x", true},
		{"x", "y", false},
		{"uuid: 82199930-6fd7-4cfe-9c68-904f725ce760", "uuid: 0a64e4a6-3a4b-4d51-9f3d-1c4d1cbb0e2f", true},
		{"2026-11-29T22:45:34.297657+00:00  INFO", "2026-12-01T08:00:00.1+00:00 INFO", true},
		{"a    b", "a b  ", true},
		{"n: <ANY> — done", "n: available, power off — done", true},
		{"n: <ANY> — done", "n: available — FAILED", false},
		{"start|...|end", "start|end", true},
		{"start|...|end", "start|x|y|end", true},
		{"start|...|end", "start|x|y", false},
		{"a|b", "a", false},
		{"a", "a|b", false},
	} {
		got := matches(normalizeAll(strings.Split(tc.want, "|")), normalizeAll(strings.Split(tc.got, "|")))
		if got != tc.ok {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.want, tc.got, got, tc.ok)
		}
	}
}
