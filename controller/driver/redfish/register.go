// Package redfish is Kiln's "redfish" hardware type: power, management
// (boot override), virtual-media boot and out-of-band inspection over
// DMTF Redfish, with gofish as the client.
//
// One Pool holds one connection per BMC account: a cached session (re-created
// on 401, logged out when the controller stops), a concurrency limit and
// pacing, and retries with backoff on connection errors and 5xx. Every
// failure names the BMC, the request and the answer, as it becomes the
// node's last_error. Vendor deviations live in Quirks, small named functions
// keyed on the service's vendor and model; a vendor Variant (see
// controller/driver/idrac) is the same interfaces under its own names with
// its quirks always on.
package redfish

import (
	"fmt"

	"github.com/kilnhq/kiln/controller/driver"
	// The "ipxe" boot interface the redfish hardware type offers.
	_ "github.com/kilnhq/kiln/controller/driver/ipxeboot"
)

// HardwareType is the name nodes give in "driver".
const HardwareType = "redfish"

// Variant is a flavour of the redfish hardware type: its names, the quirks
// it applies whatever the BMC reports, and its BMC limits.
type Variant struct {
	// HardwareType is the name nodes give in "driver".
	HardwareType string
	// Interface names the power, management and inspect interfaces; the
	// virtual-media boot interface is Interface + "-virtual-media".
	Interface string
	// Quirks names quirks (of Quirks) always applied.
	Quirks []string
	Limits Limits
	// BootDevices lists what PUT …/management/boot_device accepts.
	BootDevices []string
}

// Standard is the redfish hardware type itself.
var Standard = Variant{HardwareType: HardwareType, Interface: "redfish", BootDevices: []string{"pxe", "disk", "cdrom", "bios", "usb"}}

func init() { Register(Standard) }

// Register declares v's hardware type and its constructor.
func Register(v Variant) {
	driver.RegisterModule(driver.Module{Type: v.Type(), New: func(env driver.Env) (driver.Implementations, error) {
		return v.New(env)
	}})
}

// Type declares which interfaces v's hardware type offers.
func (v Variant) Type() driver.HardwareType {
	return driver.HardwareType{
		Name: v.HardwareType,
		Supported: map[string][]string{
			"power":      {v.Interface},
			"management": {v.Interface},
			"boot":       {"ipxe", v.Interface + "-virtual-media", "fake"},
			"inspect":    {v.Interface, "agent", "no-inspect"},
			"deploy":     {"direct", "custom-agent", "ramdisk"},
			"network":    {"noop", "flat"},
			"storage":    {"noop"},
			"bios":       {v.Interface, "no-bios"},
			"console":    {"no-console"},
			"firmware":   {v.Interface, "no-firmware"},
			"raid":       {v.Interface, "no-raid"},
			"rescue":     {"no-rescue"},
			"vendor":     {"no-vendor"},
		},
		BootDevices: v.BootDevices,
	}
}

// New builds v's interfaces on a connection pool of their own, logged out
// when the controller stops.
func (v Variant) New(env driver.Env) (driver.Implementations, error) {
	pool := NewPool(v.Limits, env.Log)
	pool.hwType = v.HardwareType
	for _, name := range v.Quirks {
		i := -1
		for j, q := range Quirks {
			if q.Name == name {
				i = j
			}
		}
		if i < 0 {
			return driver.Implementations{}, fmt.Errorf("unknown redfish quirk %q", name)
		}
		pool.forced = append(pool.forced, Quirks[i])
	}
	if env.OnShutdown != nil {
		env.OnShutdown(pool.Close)
	}
	iso := env.Media
	if iso == nil {
		iso = PrebuiltISO{}
	}
	mgmt := &Management{Pool: pool}
	return driver.Implementations{
		Power:      map[string]driver.Power{v.Interface: &Power{Pool: pool}},
		Management: map[string]driver.Management{v.Interface: mgmt},
		Boot:       map[string]driver.Boot{v.Interface + "-virtual-media": &VirtualMediaBoot{Pool: pool, ISO: iso, Mgmt: mgmt}},
		Inspect:    map[string]driver.Inspect{v.Interface: &Inspect{Pool: pool}},
		BIOS:       map[string]driver.BIOS{v.Interface: &BIOS{Pool: pool}},
		RAID:       map[string]driver.RAID{v.Interface: &RAID{Pool: pool}},
		Firmware:   map[string]driver.Firmware{v.Interface: &Firmware{Pool: pool}},
	}, nil
}
