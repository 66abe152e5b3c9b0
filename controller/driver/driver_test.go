package driver

import (
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestFakeHardwareDefaults(t *testing.T) {
	h, ok := Lookup(FakeHardware)
	if !ok {
		t.Fatal("fake-hardware is not registered")
	}
	for _, tc := range []struct{ iface, want string }{
		{"power", "fake"}, {"boot", "fake"}, {"network", "noop"}, {"storage", "noop"}, {"deploy", "fake"},
	} {
		if got := h.Default(tc.iface); got != tc.want {
			t.Errorf("Default(%s) = %q, want %q", tc.iface, got, tc.want)
		}
	}
	if err := h.Check("deploy", "direct"); err != nil {
		t.Errorf("direct deploy refused: %v", err)
	}
	if err := h.Check("power", "redfish"); err == nil {
		t.Error("redfish power accepted on fake-hardware")
	}
}

func TestRegisterDuplicatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration did not panic")
		}
	}()
	Register(HardwareType{Name: FakeHardware})
}

func TestNames(t *testing.T) {
	names := Names()
	if len(names) == 0 || names[0] != FakeHardware {
		t.Errorf("Names() = %v", names)
	}
}

// The fake boot interface sets the disk as the boot device when it prepares
// the instance, as real boot interfaces do: the conductor sets it no more.
func TestFakePrepareInstanceBootsFromDisk(t *testing.T) {
	n := &proto.Node{UUID: "0b9c7f0e-6a55-4bd8-8f2e-3c9d4e5f6a71", Driver: FakeHardware, PowerInterface: "fake", ManagementInterface: "fake",
		BootInterface: "fake", InspectInterface: "fake", DeployInterface: "fake", DriverInfo: proto.Dict{}}
	set, err := Resolve(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Boot.PrepareInstance(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	st, err := set.Management.(BootDeviceReader).ReadBootDevice(t.Context(), n)
	if err != nil || st != (BootDeviceState{Device: "disk", Persistent: true}) {
		t.Errorf("boot device %+v, %v; want disk, persistent", st, err)
	}
}
