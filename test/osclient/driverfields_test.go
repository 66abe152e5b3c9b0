package osclient_test

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestDriverFieldsOSC: `driver show --fields` and `driver list --fields`
// (microversion 1.77) print the fields asked for and no others.
func TestDriverFieldsOSC(t *testing.T) {
	t.Parallel()
	o := newOSC(t)
	drv := o.obj("driver", "show", "fake-hardware", "--fields", "name", "default_boot_interface")
	if len(drv) != 2 || drv["name"] != "fake-hardware" || drv["default_boot_interface"] != "fake" {
		t.Errorf("driver show --fields name default_boot_interface: %v", drv)
	}
	out := o.ok("driver", "list", "--fields", "name", "-f", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("driver list --fields name: not JSON rows: %v\n%s", err, out)
	}
	var names []string
	for _, r := range rows {
		if len(r) != 1 {
			t.Errorf("driver list --fields name printed %v", r)
		}
		if n, ok := r["Name"].(string); ok {
			names = append(names, n)
		}
	}
	if !slices.Contains(names, "fake-hardware") {
		t.Errorf("driver list --fields name: %s", out)
	}
}
