package secrets

import "github.com/kilnhq/kiln/proto"

// Node returns n as anyone outside the controller may see it (API answers
// of every field selection, the agent, the CLI): every free-form object
// masked at any depth and last_error scrubbed. n is not changed.
func Node(n *proto.Node) proto.Node {
	m := *n
	for _, d := range []*proto.Dict{&m.DriverInfo, &m.DriverInternalInfo, &m.InstanceInfo, &m.Properties, &m.Extra,
		&m.CleanStep, &m.DeployStep, &m.ServiceStep, &m.RAIDConfig, &m.TargetRAIDConfig, &m.NetworkData} {
		*d = MaskDict(*d)
	}
	if n.LastError != nil {
		s := Scrub(*n.LastError)
		m.LastError = &s
	}
	return m
}

// Port returns p with its free-form objects masked at any depth.
func Port(p *proto.Port) proto.Port {
	m := *p
	for _, d := range []*proto.Dict{&m.Extra, &m.InternalInfo, &m.LocalLinkConnection} {
		*d = MaskDict(*d)
	}
	return m
}

// NodeFields lists the node's free-form objects by their JSON names, the
// fields whose stored secrets a patch writing Masked back must keep.
var NodeFields = []string{"driver_info", "driver_internal_info", "instance_info", "properties", "extra",
	"clean_step", "deploy_step", "service_step", "raid_config", "target_raid_config", "network_data"}

// PortFields is NodeFields for a port.
var PortFields = []string{"extra", "internal_info", "local_link_connection"}
