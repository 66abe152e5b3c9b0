package proto

import (
	"encoding/json"
	"testing"
)

// TestPortDynamicPortgroupDefault: a port read without the 1.111 field is
// available for dynamic port groups; one that says false is not; other
// fields already set survive a decode that lacks them.
func TestPortDynamicPortgroupDefault(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want bool
	}{
		{`{"uuid":"u"}`, true},
		{`{"uuid":"u","available_for_dynamic_portgroup":false}`, false},
		{`{"uuid":"u","available_for_dynamic_portgroup":true}`, true},
	} {
		p := Port{Address: "52:54:00:00:00:01"}
		if err := json.Unmarshal([]byte(c.doc), &p); err != nil {
			t.Fatal(err)
		}
		if p.AvailableForDynamicPortgroup != c.want || p.UUID != "u" || p.Address != "52:54:00:00:00:01" {
			t.Errorf("%s: %+v, want available %v", c.doc, p, c.want)
		}
	}
	if err := json.Unmarshal([]byte(`{"available_for_dynamic_portgroup":"yes"}`), new(Port)); err == nil {
		t.Error("a string for the boolean was read")
	}
}
