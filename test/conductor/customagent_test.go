package conductor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/fakeagent"
)

// TestCustomAgentInstallCoreOS drives a deploy the way Metal3's
// baremetal-operator requests a CoreOS install: deploy_interface custom-agent,
// deploy_steps [install_coreos at priority 80] and a configdrive dict with the
// Ignition config as user_data (spec §5).
func TestCustomAgentInstallCoreOS(t *testing.T) {
	c := startController(t, controllerOpts{})
	steps := fakeagent.DefaultSteps()
	steps[proto.StepDeploy] = append(steps[proto.StepDeploy], proto.Step{Step: "install_coreos", Interface: "deploy", Priority: 0})
	m := &machine{cfg: fakeagent.Config{Steps: steps}}
	uuid := c.enroll("okd-worker-0", "52:54:00:00:13:01", map[string]any{
		"deploy_interface": "custom-agent", "automated_clean": false,
		"instance_info": map[string]any{"image_source": "http://images.example/rhcos-metal.raw.gz", "image_checksum": "d41d8cd98f00b204e9800998ecf8427e"},
	}, m)
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "provide"})
	c.waitState(uuid, proto.StateAvailable, 10*time.Second)
	c.provision(uuid, map[string]any{
		"target": "active",
		"configdrive": map[string]any{
			"meta_data": map[string]any{"uuid": uuid, "metal3-name": "okd-worker-0", "metal3-namespace": "openshift-machine-api",
				"local-hostname": "okd-worker-0", "coreos_append_karg": []string{"console=ttyS0"}},
			"user_data": `{"ignition":{"version":"3.2.0"}}`,
		},
		"deploy_steps": []map[string]any{{"interface": "deploy", "step": "install_coreos", "priority": 80, "args": map[string]any{}}},
	})
	n := c.waitState(uuid, proto.StateActive, 15*time.Second)
	if n["power_state"] != "power on" {
		t.Errorf("power %v", n["power_state"])
	}
	got := commandsSent(t, m)
	want := []string{"clean.get_clean_steps", "standby.power_off", "deploy.get_deploy_steps", "deploy.execute_deploy_step(install_coreos)", "standby.power_off"}
	// Automated cleaning is off, so the first agent only exists if manage
	// booted one; compare the deploy part.
	got = got[slices.Index(got, "deploy.get_deploy_steps"):]
	want = want[2:]
	if !slices.Equal(got, want) {
		t.Errorf("deploy commands:\n got %v\nwant %v", got, want)
	}
	m.mu.Lock()
	agent := m.agents[len(m.agents)-1]
	m.mu.Unlock()
	for _, r := range agent.Requests() {
		if r.Name != "deploy.execute_deploy_step" {
			continue
		}
		st := r.Params["step"].(map[string]any)
		if st["step"] != "install_coreos" || st["interface"] != "deploy" || st["priority"] != float64(80) {
			t.Errorf("step sent: %v", st)
		}
		if _, ok := r.Params["deploy_version"]; !ok {
			t.Errorf("execute_deploy_step without deploy_version: %v", r.Params)
		}
		node := r.Params["node"].(map[string]any)
		ii := node["instance_info"].(map[string]any)
		cd, _ := ii["configdrive"].(map[string]any)
		md, _ := cd["meta_data"].(map[string]any)
		if md["coreos_append_karg"] == nil || cd["user_data"] == nil {
			t.Errorf("the agent did not get the config drive dict in node.instance_info: %v", ii["configdrive"])
		}
	}
}
