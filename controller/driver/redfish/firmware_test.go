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

func versions(t *testing.T, f *redfish.Firmware, n *proto.Node) map[string]string {
	t.Helper()
	list, err := f.Components(context.Background(), n)
	if err != nil {
		t.Fatalf("read firmware: %v", err)
	}
	out := map[string]string{}
	for _, c := range list {
		out[c.Component] = c.Version
	}
	return out
}

// TestFirmwareUpdateEveryPersonality updates the BIOS (applied at the
// reboot the step makes) and the BMC (applied by a manager reset during
// which the BMC drops every connection for 30 s of its clock) on every
// personality, and reads the new versions back; prints each step's wall
// time and BMC requests.
func TestFirmwareUpdateEveryPersonality(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab, env := raidLab(t, name)
			pool := newPool(t, fast)
			pw := &redfish.Power{Pool: pool}
			f := &redfish.Firmware{Pool: pool}
			n := nodeFor(lab.BMCs[0], nil)
			reboots := 0
			env.Reboot = func(ctx context.Context) error {
				reboots++
				return pw.SetPowerState(ctx, n, proto.PowerRebooting, 10*time.Second)
			}
			before := versions(t, f, n)
			if before["bios"] == "" || before["bmc"] == "" {
				t.Fatalf("components %v", before)
			}
			if err := lab.SetFaults(bmcsim.Faults{ManagerResetDowntime: 30 * time.Second}); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ component, url, want string }{
				{"bios", "http://images.example/bios-2.19.1.bin", "2.19.1"},
				{"bmc", "https://images.example/bmc-7.10.30.bin", "7.10.30"},
			} {
				reqs := lab.Requests()[0]
				start := time.Now()
				err := f.Update(ctx, n, []driver.FirmwareUpdate{{Component: c.component, URL: c.url}}, env)
				t.Logf("personality %s: firmware.update %s took %s and %d BMC requests", name, c.component, time.Since(start).Round(time.Millisecond), lab.Requests()[0]-reqs)
				if err != nil {
					t.Fatalf("update %s: %v", c.component, err)
				}
				if got := versions(t, f, n)[c.component]; got != c.want {
					t.Errorf("%s version %q after the update, want %q", c.component, got, c.want)
				}
			}
			if reboots != 1 {
				t.Errorf("%d machine reboots, want 1 (for the BIOS)", reboots)
			}
		})
	}
}

// TestFirmwareFaults: an unknown component, a failing task and a BMC that
// never comes back fail the step, each named.
func TestFirmwareFaults(t *testing.T) {
	ctx := context.Background()
	lab, env := raidLab(t, "generic")
	f := &redfish.Firmware{Pool: newPool(t, fast)}
	n := nodeFor(lab.BMCs[0], nil)
	env.Reboot = func(context.Context) error { return nil }
	err := f.Update(ctx, n, []driver.FirmwareUpdate{{Component: "nic", URL: "http://x/nic.bin"}}, env)
	if err == nil || !strings.Contains(err.Error(), "no firmware component nic (it has bmc, bios)") {
		t.Errorf("unknown component: %v", err)
	}
	if err := lab.SetFaults(bmcsim.Faults{TaskError: true}); err != nil {
		t.Fatal(err)
	}
	err = f.Update(ctx, n, []driver.FirmwareUpdate{{Component: "bios", URL: "http://x/bios-3.bin"}}, env)
	if err == nil || !strings.Contains(err.Error(), "update firmware bios from http://x/bios-3.bin") || !strings.Contains(err.Error(), "TaskMonitors/") {
		t.Errorf("task error: %v", err)
	}
	if err := lab.SetFaults(bmcsim.Faults{ManagerResetDowntime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	env.Deadline = time.Minute
	err = f.Update(ctx, n, []driver.FirmwareUpdate{{Component: "bmc", URL: "http://x/bmc-9.bin"}}, env)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 1m0s of its reset") {
		t.Errorf("BMC gone: %v", err)
	}
}

func TestFirmwareStepArgs(t *testing.T) {
	ok, err := driver.FirmwareStepArgs(map[string]any{"settings": []any{map[string]any{"component": "bios", "url": "https://h/b.bin"}}})
	if err != nil || len(ok) != 1 || ok[0].URL != "https://h/b.bin" {
		t.Fatalf("%v %v", ok, err)
	}
	for name, args := range map[string]map[string]any{
		"none":      {},
		"no url":    {"settings": []any{map[string]any{"component": "bios"}}},
		"ftp":       {"settings": []any{map[string]any{"component": "bios", "url": "ftp://h/b"}}},
		"twice":     {"settings": []any{map[string]any{"component": "bios", "url": "http://h/b"}, map[string]any{"component": "bios", "url": "http://h/c"}}},
		"component": {"settings": []any{map[string]any{"url": "http://h/b"}}},
	} {
		if _, err := driver.FirmwareStepArgs(args); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestFirmwareIdentityEveryPersonality reads vendor, model and serial
// number from where Ironic's redfish firmware interface takes them: none
// for the BIOS, the Manager's Model for the BMC, the chassis'
// NetworkAdapter for a NIC component named by its serial number.
func TestFirmwareIdentityEveryPersonality(t *testing.T) {
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			p, err := bmcsim.LookupPersonality(name)
			if err != nil {
				t.Fatal(err)
			}
			wantModel := p.ManagerModel
			if wantModel == "" {
				wantModel = p.Product
			}
			lab, _ := raidLab(t, name)
			f := &redfish.Firmware{Pool: newPool(t, fast)}
			list, err := f.Components(context.Background(), nodeFor(lab.BMCs[0], nil))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]driver.FirmwareVersion{}
			for _, c := range list {
				got[c.Component] = c
			}
			if b, ok := got["bios"]; !ok || b.Vendor != "" || b.Model != "" || b.SerialNumber != "" {
				t.Errorf("bios %+v, want one without vendor, model or serial number", b)
			}
			if b, ok := got["bmc"]; !ok || b.Model != wantModel || b.Vendor != "" || b.SerialNumber != "" {
				t.Errorf("bmc %+v, want model %q and no vendor or serial number", b, wantModel)
			}
			ad := bmcsim.NetworkAdapter
			svc := lab.BMCs[0].Service
			serial := bmcsim.NICSerial(svc.Backend(svc.SystemIDs()[0]).Inventory())
			want := driver.FirmwareVersion{Component: "NIC:" + serial, Version: ad.FirmwarePackageVersion,
				Vendor: ad.Manufacturer, Model: ad.Model, SerialNumber: serial}
			if got[want.Component] != want {
				t.Errorf("NIC %+v, want %+v (components %v)", got[want.Component], want, got)
			}
			if len(got) != 3 {
				t.Errorf("%d components, want bios, bmc and the NIC: %v", len(got), got)
			}
		})
	}
}
