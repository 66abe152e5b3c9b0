package redfish_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// biosEnv reboots through the redfish power interface and never sleeps.
func biosEnv(pw *redfish.Power, n *proto.Node, reboots *int) driver.StepEnv {
	return driver.StepEnv{
		Reboot: func(ctx context.Context) error {
			*reboots++
			return pw.SetPowerState(ctx, n, proto.PowerRebooting, 10*time.Second)
		},
		Wait: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	}
}

func settingsByName(t *testing.T, b *redfish.BIOS, n *proto.Node) map[string]proto.BIOSSetting {
	t.Helper()
	list, err := b.Settings(context.Background(), n)
	if err != nil {
		t.Fatalf("read BIOS settings: %v", err)
	}
	out := map[string]proto.BIOSSetting{}
	for _, s := range list {
		out[s.Name] = s
	}
	return out
}

// TestBIOSEveryPersonality reads, applies (with the reboot it needs),
// verifies and factory-resets BIOS settings on every personality, each
// with its quirks (iDRAC's job, iLO's full pending object, Supermicro's
// If-Match), and prints each step's wall time and BMC requests.
func TestBIOSEveryPersonality(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab := startLab(t, 1, name)
			pool := newPool(t, fast)
			pw := &redfish.Power{Pool: pool}
			b := &redfish.BIOS{Pool: pool}
			n := nodeFor(lab.BMCs[0], nil)
			if err := pw.SetPowerState(ctx, n, proto.PowerOn, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			measure := func(step string, fn func() error) error {
				before := lab.Requests()[0]
				start := time.Now()
				err := fn()
				t.Logf("personality %s: %s took %s and %d BMC requests", name, step, time.Since(start).Round(time.Millisecond), lab.Requests()[0]-before)
				return err
			}
			var got map[string]proto.BIOSSetting
			_ = measure("bios read", func() error { got = settingsByName(t, b, n); return nil })
			pv, ok := got["ProcVirtualization"]
			if !ok || pv.Value == nil || *pv.Value != "Enabled" {
				t.Fatalf("ProcVirtualization: %+v", pv)
			}
			if pv.AttributeType == nil || *pv.AttributeType != "Enumeration" || strings.Join(pv.AllowableValues, ",") != "Enabled,Disabled" ||
				pv.ResetRequired == nil || !*pv.ResetRequired || pv.ReadOnly == nil || *pv.ReadOnly {
				t.Errorf("ProcVirtualization registry fields: %+v", pv)
			}
			if tag := got["SystemServiceTag"]; tag.Unique == nil || !*tag.Unique || tag.ReadOnly == nil || !*tag.ReadOnly {
				t.Errorf("SystemServiceTag registry fields: %+v", tag)
			}
			if d := got["AcPwrRcvryUserDelay"]; d.LowerBound == nil || *d.LowerBound != 60 || *d.UpperBound != 600 || *d.Value != "60" {
				t.Errorf("AcPwrRcvryUserDelay: %+v", d)
			}
			reboots := 0
			err := measure("bios.apply_configuration", func() error {
				return b.Apply(ctx, n, []driver.BIOSValue{{Name: "ProcVirtualization", Value: "Disabled"}, {Name: "AcPwrRcvryUserDelay", Value: 120}}, biosEnv(pw, n, &reboots))
			})
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			if reboots != 1 {
				t.Errorf("apply rebooted %d times, want 1", reboots)
			}
			got = settingsByName(t, b, n)
			if *got["ProcVirtualization"].Value != "Disabled" || *got["AcPwrRcvryUserDelay"].Value != "120" {
				t.Errorf("after apply: ProcVirtualization %s, AcPwrRcvryUserDelay %s", *got["ProcVirtualization"].Value, *got["AcPwrRcvryUserDelay"].Value)
			}
			err = measure("bios.factory_reset", func() error { return b.FactoryReset(ctx, n, biosEnv(pw, n, &reboots)) })
			if err != nil {
				t.Fatalf("factory reset: %v", err)
			}
			got = settingsByName(t, b, n)
			if *got["ProcVirtualization"].Value != "Enabled" || *got["AcPwrRcvryUserDelay"].Value != "60" {
				t.Errorf("after factory reset: ProcVirtualization %s, AcPwrRcvryUserDelay %s", *got["ProcVirtualization"].Value, *got["AcPwrRcvryUserDelay"].Value)
			}
		})
	}
}

// TestBIOSFaults: a setting the firmware drops fails the step naming it;
// a value the BMC refuses and a BMC answering 5xx fail naming the BMC's
// answer; nothing that did not stick is reported as applied.
func TestBIOSFaults(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab := startLab(t, 1, name)
			pool := newPool(t, fast)
			pw := &redfish.Power{Pool: pool}
			b := &redfish.BIOS{Pool: pool}
			n := nodeFor(lab.BMCs[0], nil)
			reboots := 0
			env := biosEnv(pw, n, &reboots)

			if err := lab.SetFaults(bmcsim.Faults{UnstickySettings: []string{"SriovGlobalEnable"}}); err != nil {
				t.Fatal(err)
			}
			err := b.Apply(ctx, n, []driver.BIOSValue{{Name: "SriovGlobalEnable", Value: "Enabled"}, {Name: "ProcHyperThreading", Value: "Disabled"}}, env)
			if err == nil || !strings.Contains(err.Error(), "did not apply the BIOS settings SriovGlobalEnable") || strings.Contains(err.Error(), "ProcHyperThreading") {
				t.Errorf("unsticky setting: %v", err)
			}
			if got := settingsByName(t, b, n); *got["ProcHyperThreading"].Value != "Disabled" || *got["SriovGlobalEnable"].Value != "Disabled" {
				t.Errorf("after a partial apply: %s %s", *got["ProcHyperThreading"].Value, *got["SriovGlobalEnable"].Value)
			}
			if err := lab.SetFaults(bmcsim.Faults{}); err != nil {
				t.Fatal(err)
			}

			before := reboots
			err = b.Apply(ctx, n, []driver.BIOSValue{{Name: "ProcVirtualization", Value: "Sometimes"}}, env)
			if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "ProcVirtualization") {
				t.Errorf("refused value: %v", err)
			}
			if reboots != before {
				t.Error("a refused value rebooted the machine")
			}
			err = b.Apply(ctx, n, []driver.BIOSValue{{Name: "NoSuchThing", Value: "x"}}, env)
			if err == nil || !strings.Contains(err.Error(), "no BIOS attribute NoSuchThing") {
				t.Errorf("unknown attribute: %v", err)
			}

			if err := lab.SetFaults(bmcsim.Faults{ErrorRate: 1, ErrorStatus: 503}); err != nil {
				t.Fatal(err)
			}
			err = b.Apply(ctx, n, []driver.BIOSValue{{Name: "ProcVirtualization", Value: "Disabled"}}, env)
			if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), lab.BMCs[0].URL) {
				t.Errorf("BMC answering 503: %v", err)
			}
		})
	}
}
