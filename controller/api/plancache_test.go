package api

import (
	"reflect"
	"testing"
)

// A cached plan is the plan planFields builds, for every microversion,
// and is built once; a plan with fields= is built per request.
func TestCachedPlanMatchesBuilt(t *testing.T) {
	for name, all := range map[string][]wireField{"node": nodeWireFields, "port": portWireFields} {
		for minor := MinMinor; minor <= MaxMinor; minor++ {
			got, want := planFields(all, minor, nil), buildPlan(all, minor, nil)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s plan at 1.%d: cached %+v, built %+v", name, minor, got, want)
			}
			if again := planFields(all, minor, nil); len(again.fields) > 0 && &again.fields[0] != &got.fields[0] {
				t.Errorf("%s plan at 1.%d built twice", name, minor)
			}
		}
	}
	p := planFields(nodeWireFields, MaxMinor, []string{"uuid", "driver_info"})
	if len(p.fields) != 3 || !p.shown["uuid"] || !p.shown["driver_info"] || !p.shown["links"] || !p.masked {
		t.Errorf("plan with fields=uuid,driver_info: %d fields, shown %v, masked %v", len(p.fields), p.shown, p.masked)
	}
}
