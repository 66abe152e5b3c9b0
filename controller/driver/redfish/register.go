// Package redfish is Kiln's "redfish" hardware type: power, management
// (boot override), virtual-media boot and out-of-band inspection over
// DMTF Redfish, with gofish as the client.
//
// One Pool holds one connection per BMC account: a cached session (re-created
// on 401, logged out by Shutdown), a concurrency limit and pacing, and
// retries with backoff on connection errors and 5xx. Every failure names the
// BMC, the request and the answer, as it becomes the node's last_error.
// Vendor deviations live in Quirks, small named functions keyed on the
// service's vendor and model.
package redfish

import (
	"github.com/kilnhq/kiln/controller/driver"
	// The "ipxe" boot interface the redfish hardware type offers.
	_ "github.com/kilnhq/kiln/controller/driver/ipxeboot"
)

// HardwareType is the name nodes give in "driver".
const HardwareType = "redfish"

// The registered implementations share the Default pool.
var (
	power  = &Power{Pool: Default}
	mgmt   = &Management{Pool: Default}
	vmedia = &VirtualMediaBoot{Pool: Default, ISO: PrebuiltISO{}, Mgmt: mgmt}
)

// SetISOBuilder replaces the ISO builder of the registered
// redfish-virtual-media interface (call before serving).
func SetISOBuilder(b ISOBuilder) { vmedia.ISO = b }

func init() {
	driver.RegisterPower("redfish", power)
	driver.RegisterManagement("redfish", mgmt)
	driver.RegisterBoot("redfish-virtual-media", vmedia)
	driver.RegisterInspect("redfish", &Inspect{Pool: Default})
	supported := map[string][]string{
		"power":      {"redfish"},
		"management": {"redfish"},
		"boot":       {"ipxe", "redfish-virtual-media", "fake"},
		"inspect":    {"redfish", "agent", "no-inspect"},
		"deploy":     {"direct", "custom-agent", "ramdisk"},
		"network":    {"noop", "flat"},
		"storage":    {"noop"},
		"bios":       {"redfish", "no-bios"},
		"console":    {"no-console"},
		"firmware":   {"redfish", "no-firmware"},
		"raid":       {"redfish", "no-raid"},
		"rescue":     {"no-rescue"},
		"vendor":     {"no-vendor"},
	}
	driver.Register(driver.HardwareType{
		Name:        HardwareType,
		Supported:   supported,
		BootDevices: []string{"pxe", "disk", "cdrom", "bios", "usb"},
	})
}
