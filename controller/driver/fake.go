package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// FakeHardware is the hardware type that touches nothing; it drives thousands of
// nodes in tests and demos. It is enabled from the start.
const FakeHardware = "fake-hardware"

func init() {
	supported := map[string][]string{
		"network": {"noop", "flat"},
		"storage": {"noop"},
	}
	for _, iface := range Interfaces {
		if _, ok := supported[iface]; !ok {
			supported[iface] = []string{"fake", "no-" + iface}
		}
	}
	supported["deploy"] = []string{"fake", "direct", "custom-agent", "ramdisk"}
	supported["boot"] = []string{"fake", "ipxe", "redfish-virtual-media"}
	supported["inspect"] = []string{"fake", "agent", "no-inspect"}
	Register(HardwareType{
		Name:        FakeHardware,
		Supported:   supported,
		BootDevices: []string{"pxe", "disk", "cdrom", "bios", "safe"},
	})
}

// fakePower, fakeManagement, fakeBoot and fakeInspect touch no hardware. Each
// sleeps for driver_info["fake_<iface>_delay"] seconds (as Ironic's fake
// driver does, to model slow BMCs at scale) and fails with
// driver_info["fake_<iface>_error"] when set, so tests can drive failure paths.
type fakePower struct{ states sync.Map } // node UUID → proto.PowerState

// fakeManagement holds each node's boot device as a BMC would.
type fakeManagement struct {
	devices    sync.Map // node UUID → BootDeviceState
	secureBoot sync.Map // node UUID → bool (mgmtext.go)
	leds       sync.Map // node UUID → indicator state
	bootModes  sync.Map // node UUID → "uefi" | "bios"
	nmis       sync.Map // node UUID → *atomic.Int64
}
type fakeBoot struct{}
type fakeInspect struct{}

func init() {
	RegisterPower("fake", &fakePower{})
	RegisterManagement("fake", &fakeManagement{})
	RegisterBoot("fake", fakeBoot{})
	RegisterInspect("fake", fakeInspect{})
	RegisterInspect("agent", agentInspect{})
	RegisterInspect("no-inspect", noInspect{})
}

// fakeAct waits the configured delay, then returns the configured error. It
// counts as one BMC request, so the fake type shows in the BMC metrics.
func fakeAct(ctx context.Context, n *proto.Node, iface string) (err error) {
	defer func() { ObserveBMC(ctx, FakeHardware, iface, err) }()
	return fakeWait(ctx, n, iface)
}

// FakeDeploy is the work of the fake deploy interface (no agent): it waits
// driver_info["fake_deploy_delay"] and fails with fake_deploy_error.
func FakeDeploy(ctx context.Context, n *proto.Node) error { return fakeWait(ctx, n, "deploy") }

func fakeWait(ctx context.Context, n *proto.Node, iface string) error {
	if d := Seconds(n.DriverInfo["fake_"+iface+"_delay"]); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if msg, ok := n.DriverInfo["fake_"+iface+"_error"].(string); ok && msg != "" {
		return errors.New(msg)
	}
	return nil
}

// Seconds reads a duration in seconds given as a JSON number or a numeric
// string (driver_info and driver_internal_info values); out of range is 0.
func Seconds(v any) time.Duration {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case json.Number:
		f, _ = x.Float64()
	case string:
		f, _ = strconv.ParseFloat(x, 64)
	case int:
		f = float64(x)
	}
	if f <= 0 || f > 3600 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

func (p *fakePower) Validate(ctx context.Context, n *proto.Node) error {
	if msg, ok := n.DriverInfo["fake_power_error"].(string); ok && msg != "" {
		err := fmt.Errorf("fake power credentials rejected: %s", msg)
		ObserveBMC(ctx, FakeHardware, "power", err) // a real driver learns this from its BMC
		return err
	}
	return nil
}

func (p *fakePower) GetPowerState(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
	if err := fakeAct(ctx, n, "power"); err != nil {
		return "", err
	}
	if v, ok := p.states.Load(n.UUID); ok {
		return v.(proto.PowerState), nil
	}
	if n.PowerState != nil && *n.PowerState != proto.NoPower {
		return *n.PowerState, nil
	}
	return proto.PowerOff, nil
}

func (p *fakePower) SetPowerState(ctx context.Context, n *proto.Node, target proto.PowerState, _ time.Duration) error {
	if err := fakeAct(ctx, n, "power"); err != nil {
		return err
	}
	final := target
	switch target {
	case proto.PowerRebooting, proto.PowerSoftReboot:
		final = proto.PowerOn
	case proto.PowerSoftOff:
		final = proto.PowerOff
	}
	p.states.Store(n.UUID, final)
	return nil
}

func (*fakeManagement) Validate(ctx context.Context, n *proto.Node) error { return nil }

// SetBootDevice records device; driver_info fake_boot_devices (a list)
// models a BMC that allows only those devices.
func (m *fakeManagement) SetBootDevice(ctx context.Context, n *proto.Node, device string, persistent bool) error {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return err
	}
	if allowed, ok := n.DriverInfo["fake_boot_devices"].([]any); ok {
		found := false
		for _, a := range allowed {
			found = found || a == device
		}
		if !found {
			return InvalidParameterf("fake BMC: boot device %s is not allowed; it allows %v", device, allowed)
		}
	}
	m.devices.Store(n.UUID, BootDeviceState{Device: device, Persistent: persistent})
	return nil
}

// ReadBootDevice implements BootDeviceReader: what SetBootDevice recorded.
func (m *fakeManagement) ReadBootDevice(ctx context.Context, n *proto.Node) (BootDeviceState, error) {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return BootDeviceState{}, err
	}
	if v, ok := m.devices.Load(n.UUID); ok {
		return v.(BootDeviceState), nil
	}
	return BootDeviceState{}, nil
}

func (fakeBoot) Validate(ctx context.Context, n *proto.Node) error { return nil }
func (fakeBoot) PrepareRamdisk(ctx context.Context, n *proto.Node, _ RamdiskParams) error {
	return fakeAct(ctx, n, "boot")
}
func (fakeBoot) CleanUpRamdisk(ctx context.Context, n *proto.Node) error { return nil }

// PrepareInstance makes the disk the persistent boot device, as a real boot
// interface does, through the node's management interface.
func (fakeBoot) PrepareInstance(ctx context.Context, n *proto.Node) error {
	if err := fakeAct(ctx, n, "boot"); err != nil {
		return err
	}
	set, err := Resolve(n)
	if err != nil {
		return err
	}
	return set.Management.SetBootDevice(ctx, n, "disk", true)
}

func (fakeInspect) Validate(ctx context.Context, n *proto.Node) error { return nil }
func (fakeInspect) Inspect(ctx context.Context, n *proto.Node) (InspectResult, bool, error) {
	if err := fakeAct(ctx, n, "inspect"); err != nil {
		return InspectResult{}, false, err
	}
	return InspectResult{Properties: proto.Dict{"cpus": 4, "memory_mb": 8192, "local_gb": 40, "cpu_arch": "x86_64"}}, false, nil
}

// agentInspect is in-band inspection: the ramdisk agent posts the inventory to
// /v1/continue_inspection, so the conductor boots it and waits.
type agentInspect struct{}

func (agentInspect) Validate(ctx context.Context, n *proto.Node) error { return nil }
func (agentInspect) Inspect(ctx context.Context, n *proto.Node) (InspectResult, bool, error) {
	return InspectResult{}, true, nil
}

type noInspect struct{}

func (noInspect) Validate(ctx context.Context, n *proto.Node) error {
	return errors.New("inspection is not supported by this node's inspect interface (no-inspect)")
}
func (noInspect) Inspect(ctx context.Context, n *proto.Node) (InspectResult, bool, error) {
	return InspectResult{}, false, errors.New("inspection is not supported by this node's inspect interface (no-inspect)")
}

// CheckConfig implements ConfigChecker: fake interfaces need no
// configuration (fake_*_error models a BMC failure, not a bad config).
func (p *fakePower) CheckConfig(*proto.Node) error     { return nil }
func (*fakeManagement) CheckConfig(*proto.Node) error  { return nil }
func (fakeBoot) CheckConfig(*proto.Node) error         { return nil }
func (fakeInspect) CheckConfig(*proto.Node) error      { return nil }
func (agentInspect) CheckConfig(*proto.Node) error     { return nil }
func (n noInspect) CheckConfig(node *proto.Node) error { return n.Validate(context.Background(), node) }
