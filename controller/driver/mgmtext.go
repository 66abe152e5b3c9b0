package driver

import (
	"context"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// Optional abilities of a management interface, found by type assertion:
// a hardware type whose BMC cannot do one simply does not implement it.

// SecureBooter turns UEFI Secure Boot on or off; it applies at the next
// boot.
type SecureBooter interface {
	SetSecureBoot(ctx context.Context, n *proto.Node, on bool) error
}

// Indicators reads and sets the machine's indicator LED ("On", "Off",
// "Blinking", as Ironic names the states, uppercased in its API).
type Indicators interface {
	Indicator(ctx context.Context, n *proto.Node) (string, error)
	SetIndicator(ctx context.Context, n *proto.Node, state string) error
}

// NMIInjector sends the machine a non-maskable interrupt (kernel dump).
type NMIInjector interface {
	InjectNMI(ctx context.Context, n *proto.Node) error
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
