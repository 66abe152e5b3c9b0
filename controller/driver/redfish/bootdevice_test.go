package redfish_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/proto"
)

// TestBootDeviceNotAllowed: a device outside the system's
// BootSourceOverrideTarget@Redfish.AllowableValues (iDRAC has no Usb) is the
// caller's mistake (driver.ErrInvalidParameter, answered 400) and names what
// the BMC allows; ReadBootDevice reads back what the BMC holds.
func TestBootDeviceNotAllowed(t *testing.T) {
	lab := startLab(t, 1, "idrac")
	m := &redfish.Management{Pool: newPool(t, fast)}
	n := nodeFor(lab.BMCs[0], nil)
	err := m.SetBootDevice(t.Context(), n, "usb", false)
	if !errors.Is(err, driver.ErrInvalidParameter) || !strings.Contains(err.Error(), "cannot boot from Usb: it allows") {
		t.Fatalf("SetBootDevice(usb) on iDRAC = %v, want an invalid-parameter error naming the allowed targets", err)
	}
	if err := m.SetBootDevice(t.Context(), n, "pxe", true); err != nil {
		t.Fatal(err)
	}
	got, err := m.ReadBootDevice(t.Context(), n)
	if err != nil || got != (driver.BootDeviceState{Device: "pxe", Persistent: true}) {
		t.Errorf("ReadBootDevice = %+v, %v; want pxe persistent", got, err)
	}
	if err := m.SetBootDevice(t.Context(), n, "disk", false); errors.Is(err, driver.ErrInvalidParameter) || err != nil {
		t.Errorf("SetBootDevice(disk) = %v", err)
	}
}

type observed struct {
	mu            sync.Mutex
	calls, failed int
}

func (o *observed) ObserveBMCRequest(drv, _ string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if drv != redfish.HardwareType {
		return
	}
	o.calls++
	if err != nil {
		o.failed++
	}
}

// TestBMCRequestsObserved: every request to the BMC is reported to the
// observer in the context (the controller's BMC metrics), error answers
// as failed.
func TestBMCRequestsObserved(t *testing.T) {
	lab := startLab(t, 1, "generic")
	o := &observed{}
	ctx := driver.WithBMCObserver(t.Context(), o)
	pw := &redfish.Power{Pool: newPool(t, fast)}
	if _, err := pw.GetPowerState(ctx, nodeFor(lab.BMCs[0], nil)); err != nil {
		t.Fatal(err)
	}
	if o.calls == 0 || o.failed != 0 {
		t.Fatalf("observed %d requests, %d failed; want some, none failed", o.calls, o.failed)
	}
	before := o.calls
	bad := nodeFor(lab.BMCs[0], proto.Dict{"redfish_system_id": "/redfish/v1/Systems/nope"})
	if _, err := pw.GetPowerState(ctx, bad); err == nil {
		t.Fatal("a missing system answered")
	}
	if o.calls == before || o.failed == 0 {
		t.Errorf("after a 404: %d requests, %d failed; want the failure counted", o.calls, o.failed)
	}
}
