package driver

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/kilnhq/kiln/proto"
)

// Optional abilities of a management interface, found by type assertion:
// a hardware type whose BMC cannot do one simply does not implement it.

// SecureBooter turns UEFI Secure Boot on or off; it applies at the next
// boot.
type SecureBooter interface {
	SetSecureBoot(ctx context.Context, n *proto.Node, on bool) error
}

// Indicators reads and sets the machine's indicator LED, the system
// component's "led", in Ironic's states (proto.IndicatorOn, …Off,
// …Blinking; reads may say …Unknown).
type Indicators interface {
	Indicator(ctx context.Context, n *proto.Node) (string, error)
	SetIndicator(ctx context.Context, n *proto.Node, state string) error
}

// NMIInjector sends the machine a non-maskable interrupt (kernel dump).
type NMIInjector interface {
	InjectNMI(ctx context.Context, n *proto.Node) error
}

// BootModeChanger changes the boot mode the machine starts in ("uefi" or
// "bios", as the node's boot_mode field has it) and reads it back ("" when
// the BMC does not say).
type BootModeChanger interface {
	ChangeBootMode(ctx context.Context, n *proto.Node, mode string) error
	ReadBootMode(ctx context.Context, n *proto.Node) (string, error)
}

// SecureBootReader reads whether UEFI Secure Boot is on.
type SecureBootReader interface {
	ReadSecureBoot(ctx context.Context, n *proto.Node) (bool, error)
}

// Boot modes, as the node's boot_mode field and PUT …/states/boot_mode
// name them.
const (
	BootModeUEFI = "uefi"
	BootModeBIOS = "bios"
)

// SystemLED is the one indicator an Indicators implementation serves.
var SystemLED = proto.Indicator{Component: "system", Name: "led",
	States: []string{proto.IndicatorBlinking, proto.IndicatorOff, proto.IndicatorOn}}

// IndicatorState reads an indicator state as a client may write it
// (Ironic's lowercase or its API reference's uppercase): one of SystemLED's
// states, or an invalid-parameter error.
func IndicatorState(s string) (string, error) {
	l := strings.ToLower(s)
	for _, st := range SystemLED.States {
		if l == st {
			return st, nil
		}
	}
	return "", InvalidParameterf("indicator state %q is not one of %s", s, strings.Join(SystemLED.States, ", "))
}

// ManagementCan reports whether n's management interface can carry out
// the management operation op (proto.Op…); the API refuses an
// asynchronous request it cannot, as Ironic validates before accepting.
func ManagementCan(n *proto.Node, op string) bool {
	m, err := find(managers, "management", n.ManagementInterface, n.Driver)
	if err != nil {
		return false
	}
	switch op {
	case proto.OpSetBootMode:
		_, ok := m.(BootModeChanger)
		return ok
	case proto.OpSetSecureBoot:
		_, ok := m.(SecureBooter)
		return ok
	case proto.OpInjectNMI:
		_, ok := m.(NMIInjector)
		return ok
	case proto.OpGetIndicators, proto.OpGetIndicator, proto.OpSetIndicator:
		_, ok := m.(Indicators)
		return ok
	}
	return true
}

// BMCResetter restarts the BMC itself and waits until it answers again.
type BMCResetter interface {
	ResetBMC(ctx context.Context, n *proto.Node, env StepEnv) error
}

// WantsSecureBoot reports whether the node asks for UEFI Secure Boot:
// capability secure_boot:true in instance_info or properties, the
// instance's word first (as Ironic reads it).
func WantsSecureBoot(n *proto.Node) bool {
	for _, src := range []any{n.InstanceInfo["capabilities"], n.Properties["capabilities"]} {
		caps, err := parseCapabilities(src)
		if err != nil {
			continue
		}
		if v, ok := caps["secure_boot"]; ok {
			return strings.EqualFold(v, "true")
		}
	}
	return false
}

// SetSecureBoot implements SecureBooter for fake-hardware: it records the
// state as a BMC would.
func (m *fakeManagement) SetSecureBoot(ctx context.Context, n *proto.Node, on bool) error {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return err
	}
	m.secureBoot.Store(n.UUID, on)
	return nil
}

// The fake management interface keeps the LED, boot mode and secure boot
// of each node as a BMC would, so the management endpoints run without one.

func (m *fakeManagement) Indicator(ctx context.Context, n *proto.Node) (string, error) {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return "", err
	}
	if v, ok := m.leds.Load(n.UUID); ok {
		return v.(string), nil
	}
	return proto.IndicatorOff, nil
}

func (m *fakeManagement) SetIndicator(ctx context.Context, n *proto.Node, state string) error {
	st, err := IndicatorState(state)
	if err != nil {
		return err
	}
	if err := fakeAct(ctx, n, "management"); err != nil {
		return err
	}
	m.leds.Store(n.UUID, st)
	return nil
}

// InjectNMI counts the interrupts a fake node received (FakeNMIs).
func (m *fakeManagement) InjectNMI(ctx context.Context, n *proto.Node) error {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return err
	}
	v, _ := m.nmis.LoadOrStore(n.UUID, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	return nil
}

// FakeNMIs is how many NMIs fake-hardware's node uuid received in this
// process (tests read it).
func FakeNMIs(uuid string) int64 {
	m, err := find(managers, "management", "fake", FakeHardware)
	if err != nil {
		return 0
	}
	fm, ok := m.(*fakeManagement)
	if !ok {
		return 0
	}
	if v, ok := fm.nmis.Load(uuid); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func (m *fakeManagement) ChangeBootMode(ctx context.Context, n *proto.Node, mode string) error {
	if mode != BootModeUEFI && mode != BootModeBIOS {
		return InvalidParameterf("boot mode %q is not %s or %s", mode, BootModeUEFI, BootModeBIOS)
	}
	if err := fakeAct(ctx, n, "management"); err != nil {
		return err
	}
	m.bootModes.Store(n.UUID, mode)
	return nil
}

// ReadBootMode is the mode last set, else the node's, else UEFI.
func (m *fakeManagement) ReadBootMode(ctx context.Context, n *proto.Node) (string, error) {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return "", err
	}
	if v, ok := m.bootModes.Load(n.UUID); ok {
		return v.(string), nil
	}
	if n.BootMode != nil && *n.BootMode != "" {
		return *n.BootMode, nil
	}
	return BootModeUEFI, nil
}

func (m *fakeManagement) ReadSecureBoot(ctx context.Context, n *proto.Node) (bool, error) {
	if err := fakeAct(ctx, n, "management"); err != nil {
		return false, err
	}
	v, _ := m.secureBoot.Load(n.UUID)
	on, _ := v.(bool)
	return on, nil
}
