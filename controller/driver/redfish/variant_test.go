package redfish

import (
	"context"
	"slices"
	"testing"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// A variant's quirks apply to every BMC it drives, whatever the BMC says it
// is; the standard type applies only those the BMC's identity calls for.
func TestVariantQuirksApplyWhateverTheBMCReports(t *testing.T) {
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: "generic"})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	u, p := lab.BMCs[0].Credentials()
	n := &proto.Node{UUID: "n1", DriverInfo: proto.Dict{"redfish_address": lab.BMCs[0].URL, "redfish_username": u, "redfish_password": p}}

	quirksOf := func(v Variant) []string {
		t.Helper()
		var hooks []func(context.Context) error
		impls, err := v.New(driver.Env{OnShutdown: func(f func(context.Context) error) { hooks = append(hooks, f) }})
		if err != nil {
			t.Fatal(err)
		}
		pool := impls.Power[v.Interface].(*Power).Pool
		s, err := pool.open(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.system(); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range s.quirks() {
			names = append(names, q.Name)
		}
		if len(hooks) != 1 {
			t.Fatalf("%d shutdown hooks, want the pool's log-out", len(hooks))
		}
		if err := hooks[0](t.Context()); err != nil || pool.Sessions() != 0 {
			t.Errorf("shutdown: %v, %d sessions left", err, pool.Sessions())
		}
		return names
	}
	if got := quirksOf(Standard); len(got) != 0 {
		t.Errorf("standard redfish on a generic BMC applies %v, want none", got)
	}
	v := Variant{HardwareType: "dell-ish", Interface: "dell-ish", Quirks: []string{"idrac-enabled-with-target"}}
	if got := quirksOf(v); !slices.Equal(got, []string{"idrac-enabled-with-target"}) {
		t.Errorf("variant applies %v, want its idrac-enabled-with-target", got)
	}
}

func TestVariantWithAnUnknownQuirkIsRefused(t *testing.T) {
	_, err := Variant{HardwareType: "x", Interface: "x", Quirks: []string{"no-such-quirk"}}.New(driver.Env{})
	if err == nil || err.Error() != `unknown redfish quirk "no-such-quirk"` {
		t.Errorf("err = %v", err)
	}
}
