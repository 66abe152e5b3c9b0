package conductor

import (
	"context"

	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// managementOp makes the management requests besides the boot device's
// (bootdevice.go): NMI, indicators, boot mode and secure boot. A
// management interface without the ability answers with an
// invalid-parameter error, which the API turns into a 400 as Ironic does
// for UnsupportedDriverExtension.
func (f *flow) managementOp(ctx context.Context, req proto.ManagementRequest) (decide.ManagementRead, error) {
	m := f.ifs.Management
	var read decide.ManagementRead
	unsupported := func(what string) error {
		return driver.InvalidParameterf("the %s management interface of node %s does not support %s", f.n.ManagementInterface, f.n.UUID, what)
	}
	switch req.Op {
	case proto.OpInjectNMI:
		nmi, ok := m.(driver.NMIInjector)
		if !ok {
			return read, unsupported("injecting an NMI")
		}
		return read, nmi.InjectNMI(ctx, f.n)
	case proto.OpGetIndicators:
		if _, ok := m.(driver.Indicators); ok {
			read.Indicators = []proto.Indicator{driver.SystemLED}
		}
		return read, nil
	case proto.OpGetIndicator, proto.OpSetIndicator:
		ind, ok := m.(driver.Indicators)
		if !ok {
			return read, unsupported("indicators")
		}
		if req.Component != driver.SystemLED.Component || req.Indicator != driver.SystemLED.Name {
			return read, driver.InvalidParameterf("node %s has no indicator %s@%s (it has %s@%s)", f.n.UUID, req.Indicator, req.Component, driver.SystemLED.Name, driver.SystemLED.Component)
		}
		if req.Op == proto.OpSetIndicator {
			return read, ind.SetIndicator(ctx, f.n, req.State)
		}
		st, err := ind.Indicator(ctx, f.n)
		read.IndicatorState = st
		return read, err
	case proto.OpSetBootMode:
		bm, ok := m.(driver.BootModeChanger)
		if !ok {
			return read, unsupported("changing the boot mode")
		}
		if err := bm.ChangeBootMode(ctx, f.n, req.BootMode); err != nil {
			return read, err
		}
		return f.readBootModes(ctx, read)
	case proto.OpSetSecureBoot:
		sb, ok := m.(driver.SecureBooter)
		if !ok || req.SecureBoot == nil {
			return read, unsupported("changing the secure boot state")
		}
		if err := sb.SetSecureBoot(ctx, f.n, *req.SecureBoot); err != nil {
			return read, err
		}
		return f.readBootModes(ctx, read)
	}
	return read, driver.InvalidParameterf("unknown management operation %q", req.Op)
}

// readBootModes reads the boot mode and secure boot state back from the
// BMC, as Ironic caches them on the node after a change; what the
// interface cannot read stays unknown.
func (f *flow) readBootModes(ctx context.Context, read decide.ManagementRead) (decide.ManagementRead, error) {
	if r, ok := f.ifs.Management.(driver.BootModeChanger); ok {
		mode, err := r.ReadBootMode(ctx, f.n)
		if err != nil {
			return read, err
		}
		read.BootMode = mode
	}
	if r, ok := f.ifs.Management.(driver.SecureBootReader); ok {
		on, err := r.ReadSecureBoot(ctx, f.n)
		if err != nil {
			return read, err
		}
		read.SecureBoot = &on
	}
	return read, nil
}
