package driver

import (
	"strings"
	"testing"
)

func TestBIOSText(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{"Enabled", "Enabled"}, {true, "True"}, {false, "False"}, {float64(60), "60"}, {1.5, "1.5"}, {7, "7"},
	} {
		if got := BIOSText(c.in); got == nil || *got != c.want {
			t.Errorf("BIOSText(%#v) = %v, want %q", c.in, got, c.want)
		}
	}
	if BIOSText(nil) != nil {
		t.Error("BIOSText(nil) is not nil")
	}
}

func TestBIOSStepArgs(t *testing.T) {
	ok := map[string]any{"settings": []any{map[string]any{"name": "A", "value": "x"}, map[string]any{"name": "B", "value": 3.0}}}
	vals, err := BIOSStepArgs(ok)
	if err != nil || len(vals) != 2 || vals[0].Name != "A" || vals[1].Value != 3.0 {
		t.Fatalf("BIOSStepArgs: %v, %v", vals, err)
	}
	for name, c := range map[string]struct {
		args map[string]any
		want string
	}{
		"missing":   {map[string]any{}, "non-empty list"},
		"empty":     {map[string]any{"settings": []any{}}, "non-empty list"},
		"not a map": {map[string]any{"settings": []any{"A"}}, `"settings"[0]`},
		"no name":   {map[string]any{"settings": []any{map[string]any{"value": 1}}}, `"settings"[0]`},
		"no value":  {map[string]any{"settings": []any{map[string]any{"name": "A"}}}, "has no value"},
		"twice":     {map[string]any{"settings": []any{map[string]any{"name": "A", "value": 1}, map[string]any{"name": "A", "value": 2}}}, "names A twice"},
	} {
		if _, err := BIOSStepArgs(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}
