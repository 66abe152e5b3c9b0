package driver

import (
	"maps"
	"slices"
)

// AgentRAID is the raid interface whose steps the ramdisk agent runs
// (software RAID: create_configuration, delete_configuration,
// apply_configuration), Ironic's "agent" raid interface.
const AgentRAID = "agent"

// withAgentRAID offers the agent raid interface on every hardware type that
// deploys with the agent, as Ironic offers it on ipmi, redfish and their
// vendor variants. It goes after the type's own raid interfaces, so the
// default does not change.
func withAgentRAID(h HardwareType) HardwareType {
	if !slices.Contains(h.Supported["deploy"], "direct") || slices.Contains(h.Supported["raid"], AgentRAID) {
		return h
	}
	s := maps.Clone(h.Supported)
	if len(s["raid"]) == 0 {
		s["raid"] = []string{"no-raid"}
	}
	s["raid"] = append(slices.Clone(s["raid"]), AgentRAID)
	h.Supported = s
	return h
}
