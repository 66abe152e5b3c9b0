package decide

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Software RAID through the agent raid interface: the agent's raid steps
// are planned only for a node whose raid_interface is "agent", and their
// results become raid_config as Ironic's update_raid_info makes it.

var agentRAIDSteps = proto.StepsResult{Steps: map[string][]proto.Step{
	"generic_hardware_manager": {
		{Step: "erase_devices_metadata", Interface: "deploy", Priority: 99},
		{Step: "delete_configuration", Interface: "raid", Abortable: true},
		{Step: "create_configuration", Interface: "raid", Abortable: true},
	},
}}

func TestManualCleaningRunsTheAgentsRAIDStepsOnlyWithTheAgentRAIDInterface(t *testing.T) {
	for _, c := range []struct {
		iface, want string
	}{
		{"agent", "agent execute raid.delete_configuration"},
		{"no-raid", ""},
		{"redfish", ""},
	} {
		t.Run(c.iface, func(t *testing.T) {
			n := node(proto.StateCleanWait, proto.StateManageable)
			n.RAIDInterface = c.iface
			s := withAgent(flowstate.State{ManualCleanSteps: []proto.StepCall{
				{Step: proto.Step{Step: "delete_configuration", Interface: "raid"}},
				{Step: proto.Step{Step: "create_configuration", Interface: "raid"}}}})
			in := input(t, n, s, "direct")
			acts := Step(in, AgentStepsListed{Kind: proto.StepClean, Result: agentRAIDSteps})
			if c.want != "" {
				want(t, acts, c.want)
				return
			}
			got, _ := after(t, in, acts)
			wantState(t, got, proto.StateCleanFailed, "the requested clean step raid.delete_configuration is not offered by the agent")
		})
	}
}

func raidStepDone(t *testing.T, iface, step string, result any) (*proto.Node, []Action) {
	t.Helper()
	n := node(proto.StateCleanWait, proto.StateManageable)
	n.RAIDInterface = iface
	n.RAIDConfig = proto.Dict{"logical_disks": []any{}, "last_updated": "old"}
	n.Properties = proto.Dict{"capabilities": "boot_mode:uefi,raid_level:5", "local_gb": 10}
	call := proto.StepCall{Step: proto.Step{Step: step, Interface: "raid"}}
	in := input(t, n, withAgent(flowstate.State{Steps: []proto.StepCall{call}, StepSent: true}), "direct")
	res, err := json.Marshal(proto.ExecuteStepResult{Kind: proto.StepClean, Step: call, Result: result})
	if err != nil {
		t.Fatal(err)
	}
	cmds := []proto.CommandResult{
		{CommandName: "get_clean_steps", CommandStatus: proto.CommandSucceeded},
		{CommandName: "execute_clean_step", CommandStatus: proto.CommandSucceeded, CommandResult: res},
	}
	acts := Step(in, AgentCommandsRead{Kind: proto.StepClean, Commands: cmds})
	got, _ := after(t, in, acts)
	return got, acts
}

func TestAgentRAIDResultsBecomeTheRAIDConfig(t *testing.T) {
	built := map[string]any{"logical_disks": []any{
		map[string]any{"size_gb": 100, "raid_level": "1", "controller": "software", "is_root_volume": true},
		map[string]any{"size_gb": "MAX", "raid_level": "0", "controller": "software"},
	}}
	got, _ := raidStepDone(t, "agent", "create_configuration", built)
	wantState(t, got, proto.StateManageable, "")
	if ld, _ := got.RAIDConfig["logical_disks"].([]any); len(ld) != 2 || got.RAIDConfig["last_updated"] == "old" || got.RAIDConfig["last_updated"] == nil {
		t.Fatalf("raid_config %v: want the agent's logical disks with a new last_updated", got.RAIDConfig)
	}
	if got.Properties["local_gb"] != 100 || got.Properties["capabilities"] != "boot_mode:uefi,raid_level:1" {
		t.Fatalf("properties %v: want local_gb 100 and raid_level:1 from the root volume", got.Properties)
	}

	// A root volume of size MAX leaves local_gb; a root_device_hint becomes root_device.
	got, _ = raidStepDone(t, "agent", "apply_configuration", map[string]any{"logical_disks": []any{
		map[string]any{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true, "root_device_hint": map[string]any{"name": "/dev/md0"}}}})
	if got.Properties["local_gb"] != 10 || !reflect.DeepEqual(got.Properties["root_device"], map[string]any{"name": "/dev/md0"}) {
		t.Fatalf("properties %v", got.Properties)
	}

	got, _ = raidStepDone(t, "agent", "delete_configuration", nil)
	wantState(t, got, proto.StateManageable, "")
	if len(got.RAIDConfig) != 0 {
		t.Fatalf("raid_config %v after delete_configuration, want {}", got.RAIDConfig)
	}

	got, _ = raidStepDone(t, "agent", "create_configuration", map[string]any{})
	wantState(t, got, proto.StateCleanFailed, "Agent ran create_configuration and didn't return any result")

	got, _ = raidStepDone(t, "agent", "create_configuration", map[string]any{"logical_disks": []any{
		map[string]any{"size_gb": 1, "raid_level": "1", "is_root_volume": true},
		map[string]any{"size_gb": 1, "raid_level": "1", "is_root_volume": true}}})
	wantState(t, got, proto.StateCleanFailed, "more than one root volume")

	// Another raid interface's node: the result is not ours to record.
	got, _ = raidStepDone(t, "redfish", "delete_configuration", nil)
	if got.RAIDConfig["last_updated"] != "old" {
		t.Fatalf("raid_config %v changed for a redfish raid interface", got.RAIDConfig)
	}
}

func TestWithCapability(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "raid_level:1"},
		{"boot_mode:uefi", "boot_mode:uefi,raid_level:1"},
		{"raid_level:5,boot_mode:uefi", "raid_level:1,boot_mode:uefi"},
	} {
		if got := withCapability(c.in, "raid_level", "1"); got != c.want {
			t.Errorf("withCapability(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
