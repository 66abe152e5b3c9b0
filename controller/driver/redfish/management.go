package redfish

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// Management is the "redfish" management interface: the boot source
// override (device, once or persistent, UEFI or legacy).
type Management struct{ Pool *Pool }

// Boot devices, by Kiln/Ironic name, and their Redfish override targets.
var bootTargets = map[string]string{
	"pxe":       string(schemas.PxeBootSource),
	"disk":      string(schemas.HddBootSource),
	"cdrom":     string(schemas.CdBootSource),
	"bios":      string(schemas.BiosSetupBootSource),
	"usb":       string(schemas.UsbBootSource),
	"uefi-http": "UefiHttp",
}

// Boot modes as node capabilities name them, and the Redfish values.
const (
	ModeUEFI   = "UEFI"
	ModeLegacy = "Legacy"
)

// Validate checks driver_info and that the system answers.
func (m *Management) Validate(ctx context.Context, n *proto.Node) error {
	return validate(ctx, m.Pool, n)
}

// SetBootDevice sets the override to device, once or persistent, in the
// node's boot mode (properties capabilities boot_mode:uefi|bios) when it
// names one, and reads it back to check that the BMC took it.
func (m *Management) SetBootDevice(ctx context.Context, n *proto.Node, device string, persistent bool) error {
	target, ok := bootTargets[device]
	if !ok {
		return fmt.Errorf("boot device %q is not one of %v", device, deviceNames())
	}
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	enabled := string(schemas.OnceBootSourceOverrideEnabled)
	if persistent {
		enabled = string(schemas.ContinuousBootSourceOverrideEnabled)
	}
	return s.setBoot(BootPatch{Enabled: enabled, Target: target, Mode: NodeBootMode(n)})
}

// SetBootMode sets BootSourceOverrideMode (ModeUEFI or ModeLegacy).
func (m *Management) SetBootMode(ctx context.Context, n *proto.Node, mode string) error {
	if mode != ModeUEFI && mode != ModeLegacy {
		return fmt.Errorf("boot mode %q is not %s or %s", mode, ModeUEFI, ModeLegacy)
	}
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	return s.setBoot(BootPatch{Mode: mode})
}

// BootDevice is the current override, by Kiln device name.
type BootDevice struct {
	Device     string // "" when no override is active (default order)
	Persistent bool
	Mode       string
}

// GetBootDevice reads the current boot override.
func (m *Management) GetBootDevice(ctx context.Context, n *proto.Node) (BootDevice, error) {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return BootDevice{}, err
	}
	sys, err := s.system()
	if err != nil {
		return BootDevice{}, err
	}
	b := sys.Boot
	d := BootDevice{Mode: string(b.BootSourceOverrideMode), Persistent: b.BootSourceOverrideEnabled == schemas.ContinuousBootSourceOverrideEnabled}
	if b.BootSourceOverrideEnabled != schemas.DisabledBootSourceOverrideEnabled {
		d.Device = deviceOf(string(b.BootSourceOverrideTarget))
	}
	return d, nil
}

// ReadBootDevice implements driver.BootDeviceReader.
func (m *Management) ReadBootDevice(ctx context.Context, n *proto.Node) (driver.BootDeviceState, error) {
	d, err := m.GetBootDevice(ctx, n)
	if err != nil {
		return driver.BootDeviceState{}, err
	}
	return driver.BootDeviceState{Device: d.Device, Persistent: d.Persistent}, nil
}

// SupportedBootDevices lists the devices the system's
// BootSourceOverrideTarget@Redfish.AllowableValues offers, by Kiln name.
func (m *Management) SupportedBootDevices(ctx context.Context, n *proto.Node) ([]string, error) {
	s, err := m.Pool.open(ctx, n)
	if err != nil {
		return nil, err
	}
	sys, err := s.system()
	if err != nil {
		return nil, err
	}
	return SupportedDevices(sys.Boot.AllowableBootSourceOverrideTargetValues), nil
}

// SupportedDevices maps allowable override targets to Kiln device names;
// targets without a name are left out. No annotation means every device.
func SupportedDevices(allowed []schemas.BootSource) []string {
	if len(allowed) == 0 {
		return deviceNames()
	}
	var out []string
	for _, t := range allowed {
		if d := deviceOf(string(t)); d != "" {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

func deviceOf(target string) string {
	for d, t := range bootTargets {
		if t == target {
			return d
		}
	}
	return ""
}

func deviceNames() []string {
	var n []string
	for d := range bootTargets {
		n = append(n, d)
	}
	sort.Strings(n)
	return n
}

// NodeBootMode is the Redfish boot mode the node's capabilities ask for
// (boot_mode:uefi → UEFI, boot_mode:bios → Legacy), "" when unset.
func NodeBootMode(n *proto.Node) string {
	var mode string
	switch c := n.Properties["capabilities"].(type) {
	case string:
		for _, kv := range strings.Split(c, ",") {
			if k, v, ok := strings.Cut(strings.TrimSpace(kv), ":"); ok && k == "boot_mode" {
				mode = v
			}
		}
	case map[string]any:
		mode, _ = c["boot_mode"].(string)
	}
	switch strings.ToLower(mode) {
	case "uefi":
		return ModeUEFI
	case "bios", "legacy":
		return ModeLegacy
	}
	return ""
}

// setBoot PATCHes the fields of want that differ from the current override
// (after the vendor quirks), then reads the override back. The PATCH carries
// the ETag of the read it was computed from; when another client changed the
// system in between (412), it waits a random moment, reads again and
// recomputes.
func (s *session) setBoot(want BootPatch) error {
	// Our own changes to one BMC's override are serialized, so 412 only
	// comes from other clients.
	s.bootMu.Lock()
	defer s.bootMu.Unlock()
	for attempt := 1; ; attempt++ {
		err := s.setBootOnce(want)
		var be *BMCError
		if err == nil || attempt == bootAttempts || !errors.As(err, &be) || be.Status != http.StatusPreconditionFailed {
			return err
		}
		// Two writers retrying at once in step can keep invalidating each
		// other's ETag (seen at load 30 with two controllers writing one
		// BMC: four losses in a row); a random pause, growing with the
		// attempt, lets one of them through.
		time.Sleep(time.Duration(rand.Int64N(int64(attempt) * int64(bootRetryStep))))
	}
}

// bootAttempts bounds setBoot's tries against other clients' changes; the
// pauses between them add up to at most 28 bootRetrySteps.
const (
	bootAttempts  = 8
	bootRetryStep = 20 * time.Millisecond
)

func (s *session) setBootOnce(want BootPatch) error {
	sys, err := s.system()
	if err != nil {
		return err
	}
	cur := sys.Boot
	if want.Target != "" && len(cur.AllowableBootSourceOverrideTargetValues) > 0 &&
		!slices.Contains(cur.AllowableBootSourceOverrideTargetValues, schemas.BootSource(want.Target)) {
		return driver.InvalidParameterf("BMC %s: system %s cannot boot from %s: it allows %v", s.endpoint, sys.ODataID, want.Target, cur.AllowableBootSourceOverrideTargetValues)
	}
	var p BootPatch
	if want.Enabled != "" && want.Enabled != string(cur.BootSourceOverrideEnabled) {
		p.Enabled = want.Enabled
	}
	if want.Target != "" && want.Target != string(cur.BootSourceOverrideTarget) {
		p.Target = want.Target
	}
	modeChange := want.Mode != "" && want.Mode != string(cur.BootSourceOverrideMode)
	if modeChange {
		p.Mode = want.Mode
	}
	if p == (BootPatch{}) {
		return nil
	}
	for _, q := range s.quirks() {
		if modeChange && q.ModeReadOnly {
			return fmt.Errorf("BMC %s: boot mode %s requested but this BMC's BootSourceOverrideMode is read-only (quirk %s): set the mode in the BIOS settings", s.endpoint, want.Mode, q.Name)
		}
		if q.Boot != nil {
			q.Boot(&p, cur)
		}
	}
	if err := sys.Patch(sys.ODataID, p.body()); err != nil {
		err = s.fail(fmt.Sprintf("set boot override %+v on %s", p, sys.ODataID), err)
		var be *BMCError
		if errors.As(err, &be) && be.Status == http.StatusBadRequest {
			// The BMC refused the value itself: its words go back to the client.
			return driver.InvalidParameter(err)
		}
		return err
	}
	after, err := s.system()
	if err != nil {
		return err
	}
	got := after.Boot
	if want.Enabled != "" && string(got.BootSourceOverrideEnabled) != want.Enabled ||
		want.Target != "" && string(got.BootSourceOverrideTarget) != want.Target ||
		want.Mode != "" && string(got.BootSourceOverrideMode) != want.Mode {
		return fmt.Errorf("BMC %s accepted boot override %+v on %s but reports Enabled=%s Target=%s Mode=%s", s.endpoint, want, sys.ODataID,
			got.BootSourceOverrideEnabled, got.BootSourceOverrideTarget, got.BootSourceOverrideMode)
	}
	return nil
}
