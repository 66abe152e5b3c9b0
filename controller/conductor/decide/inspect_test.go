package decide

import (
	"encoding/json"
	"testing"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Inspect: manageable → inspecting → manageable, out of band (the BMC
// answers) or in band (inspect wait until the agent posts its inventory).

func TestInspectionValidatesThenInspects(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbInspect)
	in := input(t, n, s, "direct")
	want(t, Step(in, Classify(in)), "validate inspect", "inspect")
}

func TestOutOfBandInspectionStoresPropertiesAndPorts(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbInspect)
	in := input(t, n, s, "direct")
	res := driver.InspectResult{Properties: proto.Dict{"cpus": 8, "memory_mb": 16384}, MACs: []string{"52:54:00:00:00:01"}}
	acts := Step(in, Inspected{Result: res})
	want(t, acts, "create ports 52:54:00:00:00:01", "move done")
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateManageable, "")
	if got.Properties["cpus"] != 8 || got.InspectionFinishedAt == nil || !got.InspectionFinishedAt.Equal(t0) {
		t.Errorf("properties %v finished %v, want the BMC's, at t0", got.Properties, got.InspectionFinishedAt)
	}
}

func TestInBandInspectionBootsTheAgentWithTheCallbackURL(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbInspect)
	in := input(t, n, s, "direct")
	acts := Step(in, Inspected{Async: true})
	want(t, acts, "prepare ramdisk", "rebooting", "move wait")
	if u := find[PrepareRamdisk](t, acts).KernelArgs["ipa-inspection-callback-url"]; u != "http://kiln:6385/v1/continue_inspection" {
		t.Errorf("callback URL %q", u)
	}
	got, _ := after(t, in, acts)
	wantState(t, got, proto.StateInspectWait, "")
	if got.InspectionStartedAt == nil || got.InspectionFinishedAt != nil {
		t.Errorf("started %v finished %v", got.InspectionStartedAt, got.InspectionFinishedAt)
	}
}

func TestAFailedInspectionNamesTheNode(t *testing.T) {
	n, s := requested(t, proto.StateManageable, proto.NoState, proto.VerbInspect)
	in := input(t, n, s, "direct")
	got, _ := after(t, in, Step(in, failedAt[Inspect](t, Step(in, OperatorRequest{Request: *s.Request}), "no System")))
	wantState(t, got, proto.StateInspectFailed, "Failed to inspect node "+nodeID+": no System")
}

func TestADeliveredInventoryIsReadThenApplied(t *testing.T) {
	n := node(proto.StateInspectWait, proto.StateManageable)
	in := input(t, n, withAgent(flowstate.State{InspectionPending: true}), "direct")
	want(t, Step(in, Classify(in)), "read inventory")

	inv, _ := json.Marshal(map[string]any{
		"cpu":        map[string]any{"count": 4, "architecture": "x86_64"},
		"memory":     map[string]any{"physical_mb": 8192},
		"disks":      []any{map[string]any{"name": "/dev/sda", "size": int64(20) << 30}},
		"interfaces": []any{map[string]any{"name": "eth0", "mac_address": "52:54:00:AA:BB:CC"}, map[string]any{"name": "eth1", "mac_address": "52:54:00:00:00:02"}},
		"boot":       map[string]any{"pxe_interface": "52:54:00:aa:bb:cc"},
	})
	acts := Step(in, InventoryRead{Raw: inv})
	want(t, acts, "create ports 52:54:00:aa:bb:cc", "power off", "clean up ramdisk", "move resume", "move done")
	got, fs := after(t, in, acts)
	wantState(t, got, proto.StateManageable, "")
	if got.Properties["cpus"] != 4 || got.Properties["memory_mb"] != 8192 || got.Properties["local_gb"] != int64(19) || got.Properties["cpu_arch"] != "x86_64" {
		t.Errorf("properties %v", got.Properties)
	}
	if fs.InspectionPending || fs.Agent.URL != "" {
		t.Errorf("inventory pending %v agent %+v: want both done", fs.InspectionPending, fs.Agent)
	}
}

func TestAnUnreadableInventoryFailsInspection(t *testing.T) {
	n := node(proto.StateInspectWait, proto.StateManageable)
	in := input(t, n, withAgent(flowstate.State{InspectionPending: true}), "direct")
	got, _ := after(t, in, Step(in, InventoryRead{Raw: json.RawMessage(`[]`)}))
	wantState(t, got, proto.StateInspectFailed, "Inspection of node "+nodeID+": decode inventory")
}

func TestAHeartbeatInInspectWaitIsOnlyTaken(t *testing.T) {
	n := node(proto.StateInspectWait, proto.StateManageable)
	in := input(t, n, withAgent(flowstate.State{HeartbeatPending: t0}), "direct")
	acts := Step(in, Classify(in))
	want(t, acts)
	if _, fs := after(t, in, acts); !fs.HeartbeatPending.IsZero() {
		t.Error("heartbeat still pending")
	}
}
