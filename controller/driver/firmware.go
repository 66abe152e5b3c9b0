package driver

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/kilnhq/kiln/proto"
)

// FirmwareVersion is one component's running version as the BMC reports
// it; the conductor keeps the history (initial, last flashed). Vendor,
// Model and SerialNumber identify the hardware it runs on ("" where the
// BMC says nothing; API 1.114).
type FirmwareVersion struct {
	Component string // "bios", "bmc", or the BMC's own name for others
	Version   string

	Vendor, Model, SerialNumber string
}

// FirmwareUpdate is one entry of firmware.update's "settings" argument.
type FirmwareUpdate struct {
	Component string `json:"component"`
	URL       string `json:"url"`
}

// Firmware reads and updates a machine's firmware components (the node's
// firmware_interface, API 1.86).
type Firmware interface {
	Components(ctx context.Context, n *proto.Node) ([]FirmwareVersion, error)
	// Update flashes each component from its image, reboots what must
	// reboot for it to run (the machine for the BIOS, the BMC for itself)
	// and waits until the BMC answers again.
	Update(ctx context.Context, n *proto.Node, updates []FirmwareUpdate, env StepEnv) error
}

var firmwares = map[string]Firmware{}

// RegisterFirmware registers a firmware interface implementation.
func RegisterFirmware(name string, f Firmware) { register(firmwares, "firmware", name, f) }

// ResolveFirmware returns the node's firmware interface; ErrNoInterface
// for no-firmware.
func ResolveFirmware(n *proto.Node) (Firmware, error) {
	ensureLoaded()
	implMu.RLock()
	defer implMu.RUnlock()
	if f, ok := firmwares[n.FirmwareInterface]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("firmware interface %q: %w", n.FirmwareInterface, ErrNoInterface)
}

// FirmwareStepArgs reads firmware.update's "settings": a list of
// {"component", "url"} with an http(s) URL, components unique, at most 32.
func FirmwareStepArgs(args map[string]any) ([]FirmwareUpdate, error) {
	raw, ok := args["settings"].([]any)
	if !ok || len(raw) == 0 {
		return nil, errors.New(`argument "settings" must be a non-empty list of {"component": …, "url": …}`)
	}
	if len(raw) > 32 {
		return nil, fmt.Errorf(`argument "settings" lists %d updates; at most 32 are allowed`, len(raw))
	}
	seen := map[string]bool{}
	var out []FirmwareUpdate
	for i, r := range raw {
		m, _ := r.(map[string]any)
		c, _ := m["component"].(string)
		u, _ := m["url"].(string)
		if c == "" || len(c) > 255 {
			return nil, fmt.Errorf(`argument "settings"[%d] needs a "component"`, i)
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || len(u) > 2048 {
			return nil, fmt.Errorf(`argument "settings"[%d] (%s): "url" must be an http or https URL`, i, c)
		}
		if seen[c] {
			return nil, fmt.Errorf(`argument "settings" names component %s twice`, c)
		}
		seen[c] = true
		out = append(out, FirmwareUpdate{Component: c, URL: u})
	}
	return out, nil
}
