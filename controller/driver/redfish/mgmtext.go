package redfish

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

var (
	_ driver.SecureBooter = (*Management)(nil)
	_ driver.Indicators   = (*Management)(nil)
	_ driver.NMIInjector  = (*Management)(nil)
	_ driver.BMCResetter  = (*Management)(nil)

	_ driver.BootModeChanger  = (*Management)(nil)
	_ driver.SecureBootReader = (*Management)(nil)
)

// SetSecureBoot sets Systems/<id>/SecureBoot SecureBootEnable (it applies
// at the next boot) and reads it back.
func (m *Management) SetSecureBoot(ctx context.Context, n *proto.Node, on bool) error {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	sp, err := s.systemPath()
	if err != nil {
		return err
	}
	var sys struct {
		SecureBoot odataID `json:"SecureBoot"`
	}
	if _, err := s.getJSON(ctx, sp, &sys); err != nil {
		return s.fail("read system "+sp, err)
	}
	if sys.SecureBoot.ID == "" {
		return fmt.Errorf("BMC %s: system %s has no SecureBoot resource; secure boot cannot be set", s.endpoint, sp)
	}
	var cur struct {
		SecureBootEnable *bool `json:"SecureBootEnable"`
	}
	etag, err := s.getJSON(ctx, sys.SecureBoot.ID, &cur)
	if err != nil {
		return s.fail("read secure boot", err)
	}
	if cur.SecureBootEnable != nil && *cur.SecureBootEnable == on {
		return nil
	}
	hdr := map[string]string{}
	if etag != "" {
		hdr["If-Match"] = etag
	}
	resp, err := s.do(ctx, http.MethodPatch, sys.SecureBoot.ID, map[string]any{"SecureBootEnable": on}, hdr)
	if err != nil {
		return s.fail(fmt.Sprintf("set SecureBootEnable to %v", on), err)
	}
	drain(resp)
	if _, err := s.getJSON(ctx, sys.SecureBoot.ID, &cur); err != nil {
		return s.fail("read secure boot", err)
	}
	if cur.SecureBootEnable == nil || *cur.SecureBootEnable != on {
		return fmt.Errorf("BMC %s accepted SecureBootEnable %v but reports %v", s.endpoint, on, cur.SecureBootEnable)
	}
	return nil
}

// Indicator reads the system's IndicatorLED (Lit, Off, Blinking) as
// Ironic's states: on, off, blinking.
func (m *Management) Indicator(ctx context.Context, n *proto.Node) (string, error) {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return "", err
	}
	sp, err := s.systemPath()
	if err != nil {
		return "", err
	}
	var sys struct {
		IndicatorLED string `json:"IndicatorLED"`
	}
	if _, err := s.getJSON(ctx, sp, &sys); err != nil {
		return "", s.fail("read system "+sp, err)
	}
	switch sys.IndicatorLED {
	case "Lit":
		return proto.IndicatorOn, nil
	case "Blinking":
		return proto.IndicatorBlinking, nil
	case "Off":
		return proto.IndicatorOff, nil
	}
	return proto.IndicatorUnknown, nil
}

// SetIndicator sets the system's IndicatorLED from an Ironic state.
func (m *Management) SetIndicator(ctx context.Context, n *proto.Node, state string) error {
	st, err := driver.IndicatorState(state)
	if err != nil {
		return err
	}
	led := map[string]string{proto.IndicatorOn: "Lit", proto.IndicatorOff: "Off", proto.IndicatorBlinking: "Blinking"}[st]
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	sp, err := s.systemPath()
	if err != nil {
		return err
	}
	resp, err := s.do(ctx, http.MethodPatch, sp, map[string]any{"IndicatorLED": led}, nil)
	if err != nil {
		return s.fail("set IndicatorLED to "+led, err)
	}
	drain(resp)
	return nil
}

// InjectNMI resets the system with ResetType Nmi.
func (m *Management) InjectNMI(ctx context.Context, n *proto.Node) error {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	sys, err := s.system()
	if err != nil {
		return err
	}
	allowed, _ := sys.GetSupportedResetTypes()
	if len(allowed) > 0 && !slices.Contains(allowed, schemas.NmiResetType) {
		return fmt.Errorf("BMC %s does not offer ResetType Nmi (it offers %v)", s.endpoint, allowed)
	}
	if _, err := sys.Reset(schemas.NmiResetType); err != nil {
		return s.fail("inject an NMI", err)
	}
	return nil
}

// ResetBMC resets the manager and waits for it to answer again.
func (m *Management) ResetBMC(ctx context.Context, n *proto.Node, env driver.StepEnv) error {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	return s.resetManager(ctx, env)
}

// ChangeBootMode sets BootSourceOverrideMode: UEFI for "uefi", Legacy for
// "bios".
func (m *Management) ChangeBootMode(ctx context.Context, n *proto.Node, mode string) error {
	rf, ok := map[string]string{driver.BootModeUEFI: ModeUEFI, driver.BootModeBIOS: ModeLegacy}[mode]
	if !ok {
		return driver.InvalidParameterf("boot mode %q is not %s or %s", mode, driver.BootModeUEFI, driver.BootModeBIOS)
	}
	return m.SetBootMode(ctx, n, rf)
}

// ReadBootMode reads BootSourceOverrideMode as "uefi" or "bios" ("" for
// anything else).
func (m *Management) ReadBootMode(ctx context.Context, n *proto.Node) (string, error) {
	d, err := m.GetBootDevice(ctx, n)
	if err != nil {
		return "", err
	}
	switch d.Mode {
	case ModeUEFI:
		return driver.BootModeUEFI, nil
	case ModeLegacy:
		return driver.BootModeBIOS, nil
	}
	return "", nil
}

// ReadSecureBoot reads Systems/<id>/SecureBoot SecureBootEnable.
func (m *Management) ReadSecureBoot(ctx context.Context, n *proto.Node) (bool, error) {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return false, err
	}
	sp, err := s.systemPath()
	if err != nil {
		return false, err
	}
	var sys struct {
		SecureBoot odataID `json:"SecureBoot"`
	}
	if _, err := s.getJSON(ctx, sp, &sys); err != nil {
		return false, s.fail("read system "+sp, err)
	}
	if sys.SecureBoot.ID == "" {
		return false, fmt.Errorf("BMC %s: system %s has no SecureBoot resource", s.endpoint, sp)
	}
	var cur struct {
		SecureBootEnable *bool `json:"SecureBootEnable"`
	}
	if _, err := s.getJSON(ctx, sys.SecureBoot.ID, &cur); err != nil {
		return false, s.fail("read secure boot", err)
	}
	return cur.SecureBootEnable != nil && *cur.SecureBootEnable, nil
}
