package driver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/kilnhq/kiln/proto"
)

// fakeBIOS is fake-hardware's bios interface: a small firmware with a
// registry, kept per node in memory, so BIOS steps and the /bios API run
// without a BMC. driver_info fake_bios_error fails every call and
// fake_bios_unsticky (a list of names) models settings the firmware drops.
type fakeBIOS struct{ nodes sync.Map } // node UUID → map[string]any

type fakeAttr struct {
	typ      string
	def      any
	values   []string
	readOnly bool
}

var fakeRegistry = map[string]fakeAttr{
	"BootMode":           {typ: "Enumeration", def: "Uefi", values: []string{"Uefi", "Bios"}},
	"ProcVirtualization": {typ: "Enumeration", def: "Enabled", values: []string{"Enabled", "Disabled"}},
	"SriovGlobalEnable":  {typ: "Enumeration", def: "Disabled", values: []string{"Enabled", "Disabled"}},
	"SecureBootAllowed":  {typ: "Boolean", def: true},
	"SerialNumber":       {typ: "String", def: "FAKE0001", readOnly: true},
}

func init() { RegisterBIOS("fake", &fakeBIOS{}) }

func (f *fakeBIOS) current(n *proto.Node) map[string]any {
	if v, ok := f.nodes.Load(n.UUID); ok {
		return maps.Clone(v.(map[string]any))
	}
	m := map[string]any{}
	for k, a := range fakeRegistry {
		m[k] = a.def
	}
	return m
}

func (f *fakeBIOS) Settings(ctx context.Context, n *proto.Node) ([]proto.BIOSSetting, error) {
	if err := fakeAct(ctx, n, "bios"); err != nil {
		return nil, err
	}
	cur := f.current(n)
	no := false
	out := make([]proto.BIOSSetting, 0, len(cur))
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		a := fakeRegistry[name]
		typ, ro := a.typ, a.readOnly
		out = append(out, proto.BIOSSetting{Name: name, Value: BIOSText(cur[name]), AttributeType: &typ,
			AllowableValues: a.values, ReadOnly: &ro, ResetRequired: &no, Unique: &no})
	}
	return out, nil
}

func (f *fakeBIOS) Apply(ctx context.Context, n *proto.Node, values []BIOSValue, env StepEnv) error {
	if err := fakeAct(ctx, n, "bios"); err != nil {
		return err
	}
	cur := f.current(n)
	for _, v := range values {
		a, ok := fakeRegistry[v.Name]
		switch {
		case !ok:
			return fmt.Errorf("fake BIOS has no attribute %s", v.Name)
		case a.readOnly:
			return fmt.Errorf("fake BIOS attribute %s is read-only", v.Name)
		case a.typ == "Enumeration" && !slices.Contains(a.values, fmt.Sprint(v.Value)):
			return fmt.Errorf("fake BIOS attribute %s: %v is not one of %s", v.Name, v.Value, strings.Join(a.values, ", "))
		}
	}
	if env.Reboot != nil {
		if err := env.Reboot(ctx); err != nil {
			return err
		}
	}
	unsticky, _ := n.DriverInfo["fake_bios_unsticky"].([]any)
	var dropped []string
	for _, v := range values {
		if slices.Contains(unsticky, any(v.Name)) {
			dropped = append(dropped, v.Name)
			continue
		}
		cur[v.Name] = v.Value
	}
	f.nodes.Store(n.UUID, cur)
	if len(dropped) > 0 {
		return fmt.Errorf("BIOS settings were not applied: %s", strings.Join(dropped, ", "))
	}
	return nil
}

func (f *fakeBIOS) FactoryReset(ctx context.Context, n *proto.Node, env StepEnv) error {
	if err := fakeAct(ctx, n, "bios"); err != nil {
		return err
	}
	if env.Reboot != nil {
		if err := env.Reboot(ctx); err != nil {
			return err
		}
	}
	f.nodes.Delete(n.UUID)
	return nil
}
