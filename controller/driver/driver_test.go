package driver

import "testing"

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
