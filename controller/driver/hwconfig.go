package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// Hardware configuration interfaces: BIOS settings, and later RAID and
// firmware. They are optional members of a node's set, resolved apart from
// Resolve so that a hardware type without them costs nothing. Their clean
// and service steps run in the conductor, out of band, under the node's
// reservation.

// StepEnv is what an out-of-band step may ask of the conductor.
type StepEnv struct {
	// Reboot restarts the machine (through the node's power interface,
	// recorded on the node) so staged settings take effect.
	Reboot func(ctx context.Context) error
	// Wait pauses between two polls of the BMC; it returns early with the
	// context's error. Tests make it return at once.
	Wait func(ctx context.Context, d time.Duration) error
	// Deadline bounds a wait for the BMC to finish (settings applied, a
	// task done); zero means the interface's own default.
	Deadline time.Duration
}

// Sleep is the production StepEnv.Wait.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// BIOSValue is one setting an apply_configuration step asks for.
type BIOSValue struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// BIOS reads and changes a machine's firmware settings out of band (the
// node's bios_interface).
type BIOS interface {
	// Settings reads the current settings with what the BMC's attribute
	// registry says of each.
	Settings(ctx context.Context, n *proto.Node) ([]proto.BIOSSetting, error)
	// Apply stages values, reboots the machine so they apply, and checks
	// they did: values the BMC did not apply fail it, named.
	Apply(ctx context.Context, n *proto.Node, values []BIOSValue, env StepEnv) error
	// FactoryReset restores the firmware's defaults, rebooting to apply.
	FactoryReset(ctx context.Context, n *proto.Node, env StepEnv) error
}

var bioses = map[string]BIOS{}

// RegisterBIOS registers a bios interface implementation under name.
func RegisterBIOS(name string, b BIOS) { register(bioses, "bios", name, b) }

// ErrNoInterface: the node's interface field names no implementation of
// that kind (no-bios, no-raid…): its steps are not offered.
var ErrNoInterface = errors.New("the node has no implementation of this interface")

// ResolveBIOS returns the node's bios interface; ErrNoInterface for
// no-bios (or any name nothing registered).
func ResolveBIOS(n *proto.Node) (BIOS, error) {
	ensureLoaded()
	implMu.RLock()
	defer implMu.RUnlock()
	if b, ok := bioses[n.BIOSInterface]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("bios interface %q: %w", n.BIOSInterface, ErrNoInterface)
}

// BIOSStepArgs reads apply_configuration's "settings" argument: a list of
// {"name", "value"}, names unique and not empty, at most 1,000.
func BIOSStepArgs(args map[string]any) ([]BIOSValue, error) {
	raw, ok := args["settings"].([]any)
	if !ok || len(raw) == 0 {
		return nil, errors.New(`argument "settings" must be a non-empty list of {"name": …, "value": …}`)
	}
	if len(raw) > 1000 {
		return nil, fmt.Errorf(`argument "settings" lists %d settings; at most 1000 are allowed`, len(raw))
	}
	seen := map[string]bool{}
	out := make([]BIOSValue, 0, len(raw))
	for i, r := range raw {
		m, ok := r.(map[string]any)
		name, _ := m["name"].(string)
		if !ok || name == "" || len(name) > 255 {
			return nil, fmt.Errorf(`argument "settings"[%d] must be {"name": <string>, "value": …}`, i)
		}
		if seen[name] {
			return nil, fmt.Errorf(`argument "settings" names %s twice`, name)
		}
		seen[name] = true
		v, has := m["value"]
		if !has {
			return nil, fmt.Errorf(`argument "settings"[%d] (%s) has no value`, i, name)
		}
		out = append(out, BIOSValue{Name: name, Value: v})
	}
	return out, nil
}

// BIOSText is a value as Ironic stores it: text, with Python's spelling of
// booleans; nil stays nil.
func BIOSText(v any) *string {
	var s string
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		s = x
	case bool:
		s = "False"
		if x {
			s = "True"
		}
	case float64:
		s = fmt.Sprint(x)
		if x == float64(int64(x)) {
			s = fmt.Sprint(int64(x))
		}
	default:
		s = fmt.Sprint(x)
	}
	return &s
}
