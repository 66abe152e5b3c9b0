package netconf

import "github.com/kilnhq/kiln/proto/nmstate"

// The declarative configuration Apply realises is proto/nmstate's, shared
// with the controller, which validates the same documents.
type (
	Config        = nmstate.Config
	Interface     = nmstate.Interface
	InterfaceType = nmstate.InterfaceType
	VLANConfig    = nmstate.VLANConfig
	BondConfig    = nmstate.BondConfig
	IPConfig      = nmstate.IPConfig
	Route         = nmstate.Route
	DNS           = nmstate.DNS
)

// Interface types.
const (
	Ethernet = nmstate.Ethernet
	VLAN     = nmstate.VLAN
	Bond     = nmstate.Bond
)

// ParseNMState reads an NMState document (nmstate.Parse).
func ParseNMState(b []byte) (Config, error) { return nmstate.Parse(b) }
