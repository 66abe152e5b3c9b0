package conductor_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// TestManualCleanMixesBIOSAndAgentSteps: an out-of-band BIOS step runs in
// the conductor between two agent steps; the reboot it needs restarts the
// agent, whose next heartbeat (with a fresh token) runs the next step. The
// BIOS cache is refreshed, and a setting the firmware drops fails the
// step with its name.
func TestManualCleanMixesBIOSAndAgentSteps(t *testing.T) {
	c := startController(t, controllerOpts{})
	m := &machine{}
	uuid := c.enroll("node-bios", "52:54:00:00:16:01", map[string]any{"bios_interface": "fake"}, m)
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "clean", "clean_steps": []map[string]any{
		{"interface": "deploy", "step": "erase_devices_metadata"},
		{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []map[string]any{{"name": "ProcVirtualization", "value": "Disabled"}}}},
		{"interface": "deploy", "step": "erase_devices_express"},
	}})
	n := c.waitState(uuid, proto.StateManageable, 20*time.Second)
	if n["last_error"] != nil {
		t.Fatalf("last_error %v", n["last_error"])
	}
	got := commandsSent(t, m)
	want := []string{"clean.get_clean_steps", "clean.execute_clean_step(erase_devices_metadata)", "clean.get_clean_steps", "clean.execute_clean_step(erase_devices_express)", "standby.power_off"}
	if !slices.Equal(got, want) {
		t.Errorf("agent commands:\n got %v\nwant %v", got, want)
	}
	m.mu.Lock()
	boots := len(m.bootedAt)
	m.mu.Unlock()
	if boots != 2 {
		t.Errorf("the agent booted %d times, want 2 (cleaning, then the BIOS step's reboot)", boots)
	}
	code, b := c.call("GET", "/v1/nodes/"+uuid+"/bios/ProcVirtualization", nil)
	if v, _ := b["ProcVirtualization"].(map[string]any); code != 200 || v["value"] != "Disabled" {
		t.Errorf("cached ProcVirtualization: %d %v", code, b)
	}

	// A setting that does not stick fails the step, naming it.
	if code, p := c.call("PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/driver_info/fake_bios_unsticky", "value": []string{"SriovGlobalEnable"}}}); code != 200 {
		t.Fatalf("patch: %d %v", code, p)
	}
	c.provision(uuid, map[string]any{"target": "clean", "clean_steps": []map[string]any{
		{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []map[string]any{{"name": "SriovGlobalEnable", "value": "Enabled"}}}},
	}})
	n = c.waitState(uuid, proto.StateCleanFailed, 20*time.Second)
	if le, _ := n["last_error"].(string); !strings.Contains(le, "failed step bios.apply_configuration") || !strings.Contains(le, "SriovGlobalEnable") {
		t.Errorf("last_error %q", le)
	}
}
