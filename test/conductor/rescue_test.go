package conductor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// deployed takes a scripted machine to active (automated cleaning off).
func deployed(t *testing.T, c *controller, name, mac string, m *machine) string {
	t.Helper()
	uuid := c.enroll(name, mac, map[string]any{"automated_clean": false,
		"instance_info": map[string]any{"image_source": "http://images.example/x.raw", "image_checksum": "0123456789abcdef0123456789abcdef"}}, m)
	for _, step := range []struct {
		verb string
		want proto.ProvisionState
	}{{"manage", proto.StateManageable}, {"provide", proto.StateAvailable}, {"active", proto.StateActive}} {
		c.provision(uuid, map[string]any{"target": step.verb})
		c.waitState(uuid, step.want, 15*time.Second)
	}
	return uuid
}

func TestRescueAndUnrescue(t *testing.T) {
	c := startController(t, controllerOpts{})
	m := &machine{}
	uuid := deployed(t, c, "node-rescue", "52:54:00:00:15:01", m)
	c.provision(uuid, map[string]any{"target": "rescue", "rescue_password": "let-me-in"})
	n := c.waitState(uuid, proto.StateRescue, 15*time.Second)
	if pw := n["instance_info"].(map[string]any)["rescue_password"]; pw != "******" {
		t.Errorf("rescue_password shown as %v", pw)
	}
	m.mu.Lock()
	last := m.agents[len(m.agents)-1]
	m.mu.Unlock()
	var finalize map[string]any
	for _, r := range last.Requests() {
		if r.Name == "rescue.finalize_rescue" {
			finalize = r.Params
		}
	}
	if finalize["rescue_password"] != "let-me-in" {
		t.Fatalf("finalize_rescue params: %v", finalize)
	}
	c.provision(uuid, map[string]any{"target": "unrescue"})
	n = c.waitState(uuid, proto.StateActive, 15*time.Second)
	if n["power_state"] != "power on" {
		t.Errorf("after unrescue: %v", n["power_state"])
	}
	if _, still := n["instance_info"].(map[string]any)["rescue_password"]; still {
		t.Error("rescue_password kept after unrescue")
	}
}

func TestServiceRunsStepsOnActiveNode(t *testing.T) {
	c := startController(t, controllerOpts{})
	m := &machine{}
	uuid := deployed(t, c, "node-service", "52:54:00:00:15:02", m)
	c.provision(uuid, map[string]any{"target": "service", "service_steps": []map[string]any{{"interface": "deploy", "step": "burnin_cpu"}}})
	n := c.waitState(uuid, proto.StateActive, 15*time.Second)
	if n["power_state"] != "power on" || n["last_error"] != nil {
		t.Errorf("after service: power %v last_error %v", n["power_state"], n["last_error"])
	}
	m.mu.Lock()
	last := m.agents[len(m.agents)-1]
	m.mu.Unlock()
	if got := last.Executed(proto.StepService); !slices.Equal(got, []string{"burnin_cpu"}) {
		t.Errorf("service steps executed: %v", got)
	}
}
