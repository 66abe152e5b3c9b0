package decide

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// The agent raid interface's steps (software RAID in the ramdisk).
const (
	raidCreate = "create_configuration"
	raidApply  = "apply_configuration"
	raidDelete = "delete_configuration"
)

// withoutForeignRAID drops the agent's raid steps unless the node's raid
// interface is the agent's: as in Ironic, a step runs only through the
// node's own interface (a redfish raid interface offers its own steps of
// the same names, run out of band).
func withoutForeignRAID(n *proto.Node, agent []proto.Step) []proto.Step {
	if n.RAIDInterface == driver.AgentRAID || !slices.ContainsFunc(agent, isRAIDStep) {
		return agent
	}
	return slices.DeleteFunc(slices.Clone(agent), isRAIDStep)
}

func isRAIDStep(s proto.Step) bool { return s.Interface == "raid" }

// agentRAIDDone is what Ironic's agent raid interface does when the agent
// finished one of its steps: create_configuration and apply_configuration
// return the configuration built, which becomes the node's raid_config
// (raid.update_raid_info: with last_updated; the root volume's size as
// local_gb, its root_device_hint as root_device, its level as the
// raid_level capability); delete_configuration empties raid_config. Other
// steps change nothing (nil, "").
func agentRAIDDone(n *proto.Node, step proto.StepCall, result any, now time.Time) (func(*proto.Node), string) {
	if step.Interface != "raid" || n.RAIDInterface != driver.AgentRAID {
		return nil, ""
	}
	switch step.Step.Step {
	case raidDelete:
		return func(n *proto.Node) { n.RAIDConfig = proto.Dict{} }, ""
	case raidCreate, raidApply:
	default:
		return nil, ""
	}
	cfg, _ := result.(map[string]any)
	if len(cfg) == 0 {
		return nil, fmt.Sprintf("Agent ran %s and didn't return any result", step.Step.Step)
	}
	disks, _ := cfg["logical_disks"].([]any)
	var root map[string]any
	for _, d := range disks {
		if ld, ok := d.(map[string]any); ok && ld["is_root_volume"] == true {
			if root != nil {
				return nil, "Raid config cannot have more than one root volume"
			}
			root = ld
		}
	}
	stamp := now.UTC().Format("2006-01-02 15:04:05.000000")
	return func(n *proto.Node) {
		current := proto.Dict(maps.Clone(cfg))
		current["last_updated"] = stamp
		n.RAIDConfig = current
		if root == nil {
			return
		}
		props := proto.Dict(maps.Clone(n.Properties))
		if props == nil {
			props = proto.Dict{}
		}
		if size, ok := root["size_gb"].(float64); ok {
			props["local_gb"] = int(size)
		}
		if hint, ok := root["root_device_hint"]; ok {
			props["root_device"] = hint
		}
		if lvl, ok := root["raid_level"].(string); ok {
			caps, _ := props["capabilities"].(string)
			props["capabilities"] = withCapability(caps, "raid_level", lvl)
		}
		n.Properties = props
	}, ""
}

// withCapability sets key:value in a "k1:v1,k2:v2" capabilities string,
// keeping the others in place (Ironic's get_updated_capabilities).
func withCapability(caps, key, value string) string {
	var out []string
	found := false
	for _, kv := range strings.Split(caps, ",") {
		if kv == "" {
			continue
		}
		if k, _, _ := strings.Cut(kv, ":"); k == key {
			kv, found = key+":"+value, true
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, key+":"+value)
	}
	return strings.Join(out, ",")
}
