package redfish

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/kilnhq/kiln/proto"
)

// DefaultPowerTimeout bounds a power change when the caller gives none.
const DefaultPowerTimeout = 60 * time.Second

// Power is the "redfish" power interface.
type Power struct{ Pool *Pool }

// Validate checks driver_info and that the BMC answers with the node's system.
func (p *Power) Validate(ctx context.Context, n *proto.Node) error {
	return validate(ctx, p.Pool, n)
}

func validate(ctx context.Context, pool *Pool, n *proto.Node) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := pool.open(ctx, n)
	if err != nil {
		return fmt.Errorf("validate redfish driver_info: %w", err)
	}
	if _, err := s.system(); err != nil {
		return fmt.Errorf("validate redfish driver_info: %w", err)
	}
	return nil
}

// GetPowerState reads the system's PowerState.
func (p *Power) GetPowerState(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
	s, err := p.Pool.open(ctx, n)
	if err != nil {
		return "", err
	}
	sys, err := s.system()
	if err != nil {
		return "", err
	}
	return powerOf(sys.PowerState), nil
}

// powerOf maps Redfish power states; transitions count as where they lead.
func powerOf(ps schemas.PowerState) proto.PowerState {
	switch ps {
	case schemas.OnPowerState, schemas.PoweringOnPowerState, schemas.PausedPowerState:
		return proto.PowerOn
	case schemas.OffPowerState, schemas.PoweringOffPowerState:
		return proto.PowerOff
	}
	return proto.NoPower
}

// resetChoices lists, per target, the reset types to use in order of
// preference; the first one the system allows is sent.
var resetChoices = map[proto.PowerState][]schemas.ResetType{
	proto.PowerOn:         {schemas.OnResetType, schemas.ForceOnResetType, schemas.PushPowerButtonResetType},
	proto.PowerOff:        {schemas.ForceOffResetType, schemas.PushPowerButtonResetType},
	proto.PowerRebooting:  {schemas.ForceRestartResetType, schemas.PowerCycleResetType},
	proto.PowerSoftOff:    {schemas.GracefulShutdownResetType, schemas.PushPowerButtonResetType},
	proto.PowerSoftReboot: {schemas.GracefulRestartResetType},
}

// pickReset returns the first of choices that allowed contains (every
// choice is allowed when the service lists none).
func pickReset(choices, allowed []schemas.ResetType) (schemas.ResetType, bool) {
	for _, c := range choices {
		if len(allowed) == 0 || slices.Contains(allowed, c) {
			return c, true
		}
	}
	return "", false
}

// SetPowerState drives the system to target and waits until the BMC reports
// it, polling with backoff within timeout.
func (p *Power) SetPowerState(ctx context.Context, n *proto.Node, target proto.PowerState, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultPowerTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := p.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	sys, err := s.system()
	if err != nil {
		return err
	}
	cur := powerOf(sys.PowerState)
	allowed, _ := sys.GetSupportedResetTypes()
	final := proto.PowerOn
	switch target {
	case proto.PowerOn:
		if sys.PowerState == schemas.OnPowerState {
			return nil
		}
		if cur == proto.PowerOn { // PoweringOn: already on the way
			return s.waitPower(ctx, proto.PowerOn, target, timeout)
		}
	case proto.PowerOff, proto.PowerSoftOff:
		final = proto.PowerOff
		if sys.PowerState == schemas.OffPowerState {
			return nil
		}
		if cur == proto.PowerOff { // PoweringOff: already on the way
			return s.waitPower(ctx, proto.PowerOff, target, timeout)
		}
	case proto.PowerRebooting, proto.PowerSoftReboot:
		if cur == proto.PowerOff {
			// Rebooting a machine that is off powers it on, as in Ironic.
			target = proto.PowerOn
		}
	default:
		return fmt.Errorf("unsupported power target %q", target)
	}
	if target == proto.PowerSoftReboot {
		if _, ok := pickReset(resetChoices[target], allowed); !ok {
			// No GracefulRestart: shut down gracefully, then power on.
			half := time.Until(deadline(ctx)) / 2
			if err := p.SetPowerState(ctx, n, proto.PowerSoftOff, half); err != nil {
				return err
			}
			return p.SetPowerState(ctx, n, proto.PowerOn, time.Until(deadline(ctx)))
		}
	}
	rt, ok := pickReset(resetChoices[target], allowed)
	if !ok {
		return fmt.Errorf("BMC %s: system %s allows reset types %v, none of which does %q", s.endpoint, sys.ODataID, allowed, target)
	}
	if _, err := sys.Reset(rt); err != nil {
		return s.fail(fmt.Sprintf("reset system %s (%s) for %q", sys.ODataID, rt, target), err)
	}
	return s.waitPower(ctx, final, target, timeout)
}

func deadline(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(DefaultPowerTimeout)
	}
	return d
}

// waitPower polls the system until it reports want. Reboots may pass
// through Off, so they wait for On after a first read.
func (s *session) waitPower(ctx context.Context, want, target proto.PowerState, timeout time.Duration) error {
	delay := 100 * time.Millisecond
	var last schemas.PowerState
	for {
		sys, err := s.system()
		if err == nil {
			last = sys.PowerState
			if sys.PowerState == schemas.OnPowerState && want == proto.PowerOn ||
				sys.PowerState == schemas.OffPowerState && want == proto.PowerOff {
				return nil
			}
		} else if ctx.Err() == nil {
			// A BMC busy with the transition may fail a read: keep polling.
			last = schemas.PowerState("unreadable: " + err.Error())
		}
		if err := sleep(ctx, delay); err != nil {
			return fmt.Errorf("BMC %s: %q not reached within %s: system reports power %q", s.endpoint, target, timeout, last)
		}
		delay = min(delay*2, 3*time.Second)
	}
}
