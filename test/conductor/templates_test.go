package conductor_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/fakeagent"
)

// TestDeployTemplateAddsSteps: a deploy whose instance_info.traits name a
// deploy template runs the template's step, in priority order with the
// user's deploy_steps, with the template's args; an instance trait that
// is not a node trait fails the deploy with Ironic's message.
func TestDeployTemplateAddsSteps(t *testing.T) {
	c := startController(t, controllerOpts{})
	steps := fakeagent.DefaultSteps()
	steps[proto.StepDeploy] = append(steps[proto.StepDeploy],
		proto.Step{Step: "install_coreos", Interface: "deploy", Priority: 0},
		proto.Step{Step: "apply_configuration", Interface: "bios", Priority: 0})
	m := &machine{cfg: fakeagent.Config{Steps: steps}}
	uuid := c.enroll("tmpl-0", "52:54:00:00:14:01", map[string]any{
		"deploy_interface": "custom-agent", "automated_clean": false,
		"instance_info": map[string]any{"image_source": "http://images.example/rhcos-metal.raw.gz", "traits": []string{"CUSTOM_HT_ON"}},
	}, m)
	for _, body := range []string{"CUSTOM_HT_ON", "CUSTOM_UNUSED"} {
		code, out := c.call("POST", "/v1/deploy_templates", map[string]any{"name": body, "steps": []map[string]any{
			{"interface": "bios", "step": "apply_configuration", "priority": 150, "args": map[string]any{"settings": []map[string]any{{"name": "LogicalProc", "value": body}}}},
		}})
		if code != 201 {
			t.Fatalf("create template: %d %v", code, out)
		}
	}
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "provide"})
	c.waitState(uuid, proto.StateAvailable, 10*time.Second)

	// The instance trait is not (yet) a node trait: the deploy fails.
	c.provision(uuid, map[string]any{"target": "active",
		"deploy_steps": []map[string]any{{"interface": "deploy", "step": "install_coreos", "priority": 80, "args": map[string]any{}}}})
	n := c.waitState(uuid, proto.StateDeployFailed, 15*time.Second)
	if le, _ := n["last_error"].(string); !strings.Contains(le, "Cannot specify instance traits that are not also set on the node. Node "+uuid+" is missing traits CUSTOM_HT_ON") {
		t.Errorf("last_error %q", le)
	}

	// Node traits have no API here yet: set them in the store.
	if _, err := c.st.UpdateNode(context.Background(), uuid, func(n *proto.Node) error {
		n.Traits = []string{"CUSTOM_HT_ON", "CUSTOM_UNUSED"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	before := len(m.agents)
	m.mu.Unlock()
	c.provision(uuid, map[string]any{"target": "active",
		"deploy_steps": []map[string]any{{"interface": "deploy", "step": "install_coreos", "priority": 80, "args": map[string]any{}}}})
	n = c.waitState(uuid, proto.StateActive, 15*time.Second)
	if n["last_error"] != nil {
		t.Errorf("last_error %v", n["last_error"])
	}
	m.mu.Lock()
	agent := m.agents[len(m.agents)-1]
	fresh := len(m.agents) > before
	m.mu.Unlock()
	if !fresh {
		t.Fatal("no agent booted for the second deploy")
	}
	var sent []string
	for _, r := range agent.Requests() {
		if r.Name != "deploy.execute_deploy_step" {
			continue
		}
		st := r.Params["step"].(map[string]any)
		sent = append(sent, st["interface"].(string)+"."+st["step"].(string))
		if st["step"] == "apply_configuration" {
			args, _ := st["args"].(map[string]any)
			settings, _ := args["settings"].([]any)
			if st["priority"] != float64(150) || len(settings) != 1 || settings[0].(map[string]any)["value"] != "CUSTOM_HT_ON" {
				t.Errorf("template step sent as %v", st)
			}
		}
	}
	// Highest priority first: the template's 150, then the user's 80; the
	// unselected template adds nothing.
	if !slices.Equal(sent, []string{"bios.apply_configuration", "deploy.install_coreos"}) {
		t.Errorf("deploy steps sent: %v", sent)
	}
}

// TestManualCleanWithRunbook: "clean" with a runbook runs the runbook's
// steps in its order, with its args, as manual cleaning runs clean_steps.
func TestManualCleanWithRunbook(t *testing.T) {
	c := startController(t, controllerOpts{})
	m := &machine{}
	uuid := c.enroll("node-rb", "52:54:00:00:14:02", nil, m)
	code, out := c.call("POST", "/v1/runbooks", map[string]any{"name": "CUSTOM_WIPE", "steps": []map[string]any{
		{"interface": "deploy", "step": "erase_devices_metadata", "order": 2},
		{"interface": "deploy", "step": "erase_devices_express", "order": 1, "args": map[string]any{"passes": 1}},
	}})
	if code != 201 {
		t.Fatalf("runbook: %d %v", code, out)
	}
	if _, err := c.st.UpdateNode(context.Background(), uuid, func(n *proto.Node) error {
		n.Traits = []string{"CUSTOM_WIPE"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "clean", "runbook": "CUSTOM_WIPE"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	got := commandsSent(t, m)
	want := []string{"clean.get_clean_steps", "clean.execute_clean_step(erase_devices_express)", "clean.execute_clean_step(erase_devices_metadata)", "standby.power_off"}
	if !slices.Equal(got, want) {
		t.Errorf("runbook clean commands:\n got %v\nwant %v", got, want)
	}
	m.mu.Lock()
	agent := m.agents[len(m.agents)-1]
	m.mu.Unlock()
	for _, r := range agent.Requests() {
		if st, ok := r.Params["step"].(map[string]any); ok && st["step"] == "erase_devices_express" {
			if args, _ := st["args"].(map[string]any); args["passes"] != float64(1) {
				t.Errorf("step sent as %v", st)
			}
		}
	}
}
