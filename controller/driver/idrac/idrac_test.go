package idrac_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	_ "github.com/kilnhq/kiln/controller/driver/idrac"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

func TestTheIdracHardwareTypeOffersIronicsIdracRedfishInterfaces(t *testing.T) {
	hw, ok := driver.Lookup("idrac")
	if !ok {
		t.Fatal("hardware type idrac is not registered")
	}
	for iface, impl := range map[string]string{
		"power": "idrac-redfish", "management": "idrac-redfish", "inspect": "idrac-redfish", "boot": "idrac-redfish-virtual-media",
	} {
		if err := hw.Check(iface, impl); err != nil {
			t.Error(err)
		}
	}
	if slices.Contains(hw.BootDevices, "usb") {
		t.Errorf("boot devices %v offer usb, which iDRAC does not allow", hw.BootDevices)
	}
}

type counter struct {
	mu  sync.Mutex
	ops map[string]int
}

func (c *counter) ObserveBMCRequest(drv, _ string, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops[drv]++
}

// A node with driver "idrac" resolves to interfaces built by Load, drives an
// iDRAC (the simulator's Dell personality) and counts its BMC requests
// under its own hardware type.
func TestAnIdracNodeDrivesItsBMC(t *testing.T) {
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: "idrac"})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	var hooks []func(context.Context) error
	if err := driver.Load(driver.Env{OnShutdown: func(f func(context.Context) error) { hooks = append(hooks, f) }}); err != nil {
		t.Fatal(err)
	}
	u, p := lab.BMCs[0].Credentials()
	n := &proto.Node{UUID: "7d0c2a53-8d67-4a8b-9f0e-2b4f5c6d7e81", Driver: "idrac",
		PowerInterface: "idrac-redfish", ManagementInterface: "idrac-redfish", InspectInterface: "idrac-redfish",
		BootInterface: "idrac-redfish-virtual-media", DeployInterface: "direct",
		DriverInfo: proto.Dict{"redfish_address": lab.BMCs[0].URL, "redfish_username": u, "redfish_password": p}}
	ifs, err := driver.Resolve(n)
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{ops: map[string]int{}}
	ctx := driver.WithBMCObserver(t.Context(), c)
	if err := ifs.Power.SetPowerState(ctx, n, proto.PowerOn, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if ps, err := ifs.Power.GetPowerState(ctx, n); err != nil || ps != proto.PowerOn {
		t.Fatalf("power state %q, %v; want power on", ps, err)
	}
	if err := ifs.Management.SetBootDevice(ctx, n, "pxe", true); err != nil {
		t.Fatal(err)
	}
	r, ok := ifs.Management.(driver.BootDeviceReader)
	if !ok {
		t.Fatal("idrac-redfish management cannot read the boot device")
	}
	if st, err := r.ReadBootDevice(ctx, n); err != nil || st != (driver.BootDeviceState{Device: "pxe", Persistent: true}) {
		t.Errorf("boot device %+v, %v; want pxe persistent", st, err)
	}
	if c.ops["idrac"] == 0 || c.ops["redfish"] != 0 {
		t.Errorf("BMC requests by hardware type %v, want them all under idrac", c.ops)
	}
	if len(hooks) == 0 {
		t.Fatal("no shutdown hook: the BMC session would stay open")
	}
	for _, h := range hooks {
		if err := h(t.Context()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
}
