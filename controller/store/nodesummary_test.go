package store

import (
	"reflect"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestSplitSummary: summaryRow's parts are read back, and any row that is
// not exactly seven well-formed parts is refused (and so read again column
// by column) rather than misread.
func TestSplitSummary(t *testing.T) {
	name, res, empty := "rack1~node1", "cond-a", ""
	const u = "0d1e2f3a-0000-4000-8000-000000000001"
	for _, tc := range []struct {
		row  string
		want *NodeSummary // nil: refused
	}{
		{u + "\x1f=rack1~node1\x1finst\x1fpower on\x1factive\x1f1\x1f=cond-a",
			&NodeSummary{UUID: u, Name: &name, InstanceUUID: "inst", PowerState: "power on", ProvisionState: proto.StateActive, Maintenance: true, Reservation: &res}},
		{u + "\x1f\x1f\x1f\x1fenroll\x1f0\x1f", &NodeSummary{UUID: u, ProvisionState: proto.StateEnroll}},
		{u + "\x1f=\x1f\x1f\x1fenroll\x1f0\x1f=", &NodeSummary{UUID: u, Name: &empty, ProvisionState: proto.StateEnroll, Reservation: &empty}},
		{u + "\x1f=a\x1fb\x1f\x1f\x1fenroll\x1f0\x1f", nil}, // a separator in the name: eight parts
		{u + "\x1f=a\x1f\x1fenroll\x1f0\x1f", nil},          // six parts
		{u + "\x1fa\x1f\x1f\x1fenroll\x1f0\x1f", nil},       // a name without its "="
		{u + "\x1f\x1f\x1f\x1fenroll\x1f0\x1fcond", nil},    // a reservation without its "="
		{u + "\x1f\x1f\x1f\x1fenroll\x1ftrue\x1f", nil},     // maintenance neither 1 nor 0
		{u + "\x1f\x1f\x1f\x1fenroll\x1f0\x1f=a\x1fb", nil}, // a separator in the reservation
		{"", nil},
	} {
		var got NodeSummary
		ok := splitSummary(tc.row, &got)
		if tc.want == nil {
			if ok {
				t.Errorf("splitSummary(%q) accepted the row: %+v", tc.row, got)
			}
			continue
		}
		if !ok || !reflect.DeepEqual(&got, tc.want) {
			t.Errorf("splitSummary(%q) = %+v, %v; want %+v", tc.row, got, ok, tc.want)
		}
	}
}
