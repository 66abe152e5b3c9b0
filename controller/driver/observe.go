package driver

import "context"

// BMCObserver is told about every request a driver makes to a BMC (one
// Redfish call, one IPMI command; a fake-hardware action), so that the
// controller can count them and their failures per hardware type.
type BMCObserver interface {
	ObserveBMCRequest(driver, op string, err error)
}

type bmcObserverKey struct{}

// WithBMCObserver returns ctx carrying o. The conductor's context carries the
// controller's observer, so every driver call made on its behalf is counted
// without a global registry.
func WithBMCObserver(ctx context.Context, o BMCObserver) context.Context {
	return context.WithValue(ctx, bmcObserverKey{}, o)
}

// ObserveBMC reports one BMC request of hardware type driver (op names it:
// "power", "GET /redfish/v1/Systems/1", "chassis power status") and its
// outcome to the observer in ctx, if any. Drivers call it once per request.
func ObserveBMC(ctx context.Context, driver, op string, err error) {
	if o, ok := ctx.Value(bmcObserverKey{}).(BMCObserver); ok && o != nil {
		o.ObserveBMCRequest(driver, op, err)
	}
}
