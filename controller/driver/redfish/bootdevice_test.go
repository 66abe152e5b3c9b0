package redfish_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/driver/redfish"
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
