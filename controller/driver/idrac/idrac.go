// Package idrac is the "idrac" hardware type: Dell iDRAC over Redfish,
// Ironic's idrac-redfish interfaces. It is the redfish hardware type under
// Dell's names with iDRAC's quirks always on, so they apply even when a
// BMC's service root does not say Dell (an iDRAC behind a proxy, or
// firmware that reports another vendor string).
package idrac

import "github.com/kilnhq/kiln/controller/driver/redfish"

// Variant is the iDRAC flavour of redfish.
var Variant = redfish.Variant{
	HardwareType: "idrac",
	Interface:    "idrac-redfish",
	// iDRAC refuses a boot override naming a target without
	// BootSourceOverrideEnabled (IDRAC.2.8.SYS444).
	Quirks: []string{"idrac-enabled-with-target"},
	// iDRAC's BootSourceOverrideTarget@Redfish.AllowableValues has no Usb.
	BootDevices: []string{"pxe", "disk", "cdrom", "bios"},
}

func init() { redfish.Register(Variant) }
