package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestDriverFields: ?fields= on GET /v1/drivers and /v1/drivers/{name}
// (1.77) keeps the fields asked for and the links; older versions get 406,
// a field the view lacks 400, fields with detail=True 400.
func TestDriverFields(t *testing.T) {
	srv, _ := stepsServer(t)
	keys := func(m map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	code, one := call(t, srv, "GET", "/v1/drivers/fake-hardware?fields=name,default_boot_interface,enabled_power_interfaces", "1.77", "")
	if code != http.StatusOK || !slices.Equal(keys(one), []string{"default_boot_interface", "enabled_power_interfaces", "links", "name"}) || one["name"] != "fake-hardware" {
		t.Errorf("one driver with fields: %d %v", code, one)
	}
	code, list := call(t, srv, "GET", "/v1/drivers?fields=name", "1.77", "")
	drivers, _ := list["drivers"].([]any)
	if code != http.StatusOK || len(drivers) == 0 {
		t.Fatalf("list with fields: %d %v", code, list)
	}
	for _, d := range drivers {
		if !slices.Equal(keys(d.(map[string]any)), []string{"links", "name"}) {
			t.Errorf("listed driver with fields=name: %v", d)
		}
	}
	if code, full := call(t, srv, "GET", "/v1/drivers/fake-hardware", "1.77", ""); code != http.StatusOK || full["hosts"] == nil || full["default_deploy_interface"] == nil {
		t.Errorf("without fields: %d %v", code, full)
	}
	for _, c := range []struct {
		name, path, version string
		code                int
		fault               string
	}{
		{"one below 1.77", "/v1/drivers/fake-hardware?fields=name", "1.76", 406, ""},
		{"list below 1.77", "/v1/drivers?fields=name", "1.76", 406, ""},
		{"unknown field", "/v1/drivers/fake-hardware?fields=name,colour", "1.77", 400, `Field(s) "colour" are not valid`},
		{"interfaces in a list without detail", "/v1/drivers?fields=default_boot_interface", "1.77", 400, `Field(s) "default_boot_interface" are not valid`},
		{"fields and detail", "/v1/drivers?fields=name&detail=True", "1.77", 400, "Can not specify ?detail=True and fields"},
		{"unknown driver", "/v1/drivers/nope?fields=name", "1.77", 404, "Driver nope could not be found."},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, srv, "GET", c.path, c.version, "")
			if code != c.code {
				t.Fatalf("status %d, want %d: %v", code, c.code, body)
			}
			if c.fault != "" && !strings.Contains(ironicFault(t, body), c.fault) {
				t.Errorf("faultstring %q, want %q", ironicFault(t, body), c.fault)
			}
		})
	}
}
