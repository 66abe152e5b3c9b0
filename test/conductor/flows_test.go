package conductor_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/fakeagent"
)

// commandsSent lists "name(step)" for every command the controller sent to
// the machine's agents, in order, and checks the token on each.
func commandsSent(t *testing.T, m *machine) []string {
	t.Helper()
	m.mu.Lock()
	agents := slices.Clone(m.agents)
	m.mu.Unlock()
	var out []string
	for _, a := range agents {
		for _, r := range a.Requests() {
			if !strings.HasPrefix(r.Path, "/v1/commands") {
				continue
			}
			if r.Token == "" || r.Token != a.Token() {
				t.Errorf("%s %s sent with token %q, agent has %q", r.Method, r.Path, r.Token, a.Token())
			}
			if r.Method != "POST" {
				continue
			}
			name := r.Name
			if st, ok := r.Params["step"].(map[string]any); ok {
				name += "(" + fmt.Sprint(st["step"]) + ")"
			}
			out = append(out, name)
		}
	}
	return out
}

func TestAgentDrivenLifecycle(t *testing.T) {
	c := startController(t, controllerOpts{})
	m := &machine{}
	uuid := c.enroll("node-a", "52:54:00:00:10:01", nil, m)

	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)

	// Inspection: the agent posts its inventory; ports and properties follow.
	m.cfg.Inspect = true
	m.cfg.Inventory = map[string]any{
		"cpu":        map[string]any{"count": 16, "architecture": "x86_64", "model_name": "Test CPU", "frequency": "2400", "flags": []string{}, "socket_count": 1},
		"memory":     map[string]any{"total": int64(64) << 30, "physical_mb": 65536},
		"disks":      []any{map[string]any{"name": "/dev/vda", "size": int64(100) << 30, "rotational": false}},
		"interfaces": []any{map[string]any{"name": "eth0", "mac_address": "52:54:00:00:10:01"}, map[string]any{"name": "eth1", "mac_address": "52:54:00:00:10:02"}},
		"boot":       map[string]any{"current_boot_mode": "uefi", "pxe_interface": "52:54:00:00:10:01"},
	}
	c.provision(uuid, map[string]any{"target": "inspect"})
	n := c.waitState(uuid, proto.StateManageable, 10*time.Second)
	props := n["properties"].(map[string]any)
	if props["cpus"] != float64(16) || props["memory_mb"] != float64(65536) || props["local_gb"] != float64(99) || props["cpu_arch"] != "x86_64" {
		t.Errorf("properties after inspection: %v", props)
	}
	if n["power_state"] != "power off" || n["inspection_finished_at"] == nil {
		t.Errorf("after inspection: power %v, finished %v", n["power_state"], n["inspection_finished_at"])
	}
	if code, inv := c.call("GET", "/v1/nodes/"+uuid+"/inventory", nil); code != 200 || inv["inventory"] == nil {
		t.Errorf("inventory: %d %v", code, inv)
	}
	m.cfg.Inspect = false

	// Automated cleaning runs the agent's steps with a priority, highest first.
	c.provision(uuid, map[string]any{"target": "provide"})
	n = c.waitState(uuid, proto.StateAvailable, 10*time.Second)
	if n["power_state"] != "power off" {
		t.Errorf("after cleaning: power %v", n["power_state"])
	}
	got := commandsSent(t, m)
	want := []string{"clean.get_clean_steps", "clean.execute_clean_step(erase_devices_metadata)", "clean.execute_clean_step(erase_devices)", "standby.power_off"}
	if !slices.Equal(got, want) {
		t.Errorf("cleaning commands:\n got %v\nwant %v", got, want)
	}

	// Direct deploy: write_image with image_info and the rendered config drive.
	code, out := c.call("PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": "http://images.example/disk.qcow2"},
		{"op": "add", "path": "/instance_info/image_checksum", "value": strings.Repeat("ab", 32)},
		{"op": "add", "path": "/instance_info/image_disk_format", "value": "qcow2"},
		{"op": "add", "path": "/instance_info/root_device", "value": map[string]any{"name": "s== /dev/vda"}},
	})
	if code != 200 {
		t.Fatalf("patch: %d %v", code, out)
	}
	m.mu.Lock()
	before := len(m.agents)
	m.mu.Unlock()
	c.provision(uuid, map[string]any{"target": "active", "configdrive": map[string]any{"meta_data": map[string]any{"local-hostname": "node-a"}, "user_data": "#cloud-config\n"}})
	n = c.waitState(uuid, proto.StateActive, 15*time.Second)
	if n["power_state"] != "power on" || n["last_error"] != nil {
		t.Errorf("after deploy: power %v last_error %v", n["power_state"], n["last_error"])
	}
	m.mu.Lock()
	deployAgent := m.agents[before]
	m.mu.Unlock()
	var deployCmds []string
	var writeImage, bootloader map[string]any
	for _, r := range deployAgent.Requests() {
		if r.Method == "POST" {
			deployCmds = append(deployCmds, r.Name)
			if st, ok := r.Params["step"].(map[string]any); ok && st["step"] == "write_image" {
				writeImage = st["args"].(map[string]any)
			}
			if r.Name == "image.install_bootloader" {
				bootloader = r.Params
			}
		}
	}
	// A whole-disk image on a node that names no boot mode: the UEFI boot
	// entry, if the agent booted UEFI, from the root the agent reported.
	wantDeploy := []string{"deploy.get_deploy_steps", "deploy.execute_deploy_step", "standby.get_partition_uuids", "image.install_bootloader", "standby.power_off"}
	if !slices.Equal(deployCmds, wantDeploy) {
		t.Errorf("deploy commands:\n got %v\nwant %v", deployCmds, wantDeploy)
	}
	if bootloader["root_uuid"] != fakeagent.RootUUID || bootloader["target_boot_mode"] != nil {
		t.Errorf("install_bootloader params %v, want root_uuid %s and no target_boot_mode", bootloader, fakeagent.RootUUID)
	}
	info, _ := writeImage["image_info"].(map[string]any)
	if info["disk_format"] != "qcow2" || info["checksum"] != strings.Repeat("ab", 32) || info["id"] != "disk.qcow2" {
		t.Errorf("image_info = %v", info)
	}
	if cd, _ := writeImage["configdrive"].(string); len(cd) < 100 {
		t.Errorf("configdrive not rendered: %q", cd)
	}
	// Every command result the agent gave names the command without its extension.
	for _, res := range deployAgent.Commands() {
		if strings.Contains(res.CommandName, ".") {
			t.Errorf("command_name %q has an extension prefix", res.CommandName)
		}
	}

	// Undeploy: tear down, then automated cleaning again, back to available.
	c.provision(uuid, map[string]any{"target": "deleted"})
	n = c.waitState(uuid, proto.StateAvailable, 15*time.Second)
	if ii := n["instance_info"].(map[string]any); len(ii) != 0 {
		t.Errorf("instance_info after undeploy: %v", ii)
	}
	if dii := n["driver_internal_info"].(map[string]any); dii["agent_url"] != nil || dii["agent_secret_token"] != nil {
		t.Errorf("agent identity not wiped: %v", dii)
	}
}

func TestManualCleanRunsRequestedStepsInOrder(t *testing.T) {
	c := startController(t, controllerOpts{})
	m := &machine{}
	uuid := c.enroll("node-m", "52:54:00:00:11:01", nil, m)
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "clean", "clean_steps": []map[string]any{
		{"interface": "deploy", "step": "erase_devices_express"},
		{"interface": "deploy", "step": "erase_devices_metadata"},
	}})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	got := commandsSent(t, m)
	want := []string{"clean.get_clean_steps", "clean.execute_clean_step(erase_devices_express)", "clean.execute_clean_step(erase_devices_metadata)", "standby.power_off"}
	if !slices.Equal(got, want) {
		t.Errorf("manual clean commands:\n got %v\nwant %v", got, want)
	}
}

func TestFailurePaths(t *testing.T) {
	t.Run("bad credentials at manage", func(t *testing.T) {
		c := startController(t, controllerOpts{})
		uuid := c.enroll("node-creds", "52:54:00:00:12:01", map[string]any{"driver_info": map[string]any{"scripted_address": "10.9.9.9", "scripted_password": "wrong"}}, &machine{})
		c.provision(uuid, map[string]any{"target": "manage"})
		n := c.waitState(uuid, proto.StateEnroll, 10*time.Second)
		if le, _ := n["last_error"].(string); !strings.Contains(le, "authentication failed for BMC 10.9.9.9") {
			t.Errorf("last_error = %q", le)
		}
		_, h := c.call("GET", "/v1/nodes/"+uuid+"/history", nil)
		if !strings.Contains(fmt.Sprint(h), "authentication failed") {
			t.Errorf("history lacks the failure: %v", h)
		}
	})
	t.Run("agent step FAILED", func(t *testing.T) {
		c := startController(t, controllerOpts{})
		m := &machine{cfg: fakeagent.Config{StepBehavior: func(kind, step string, _ map[string]any) (any, error, time.Duration) {
			if step == "erase_devices" {
				return nil, fmt.Errorf("disk /dev/sdb refused the secure erase"), 0
			}
			return nil, nil, 0
		}}}
		uuid := c.enroll("node-fail", "52:54:00:00:12:02", nil, m)
		c.provision(uuid, map[string]any{"target": "manage"})
		c.waitState(uuid, proto.StateManageable, 10*time.Second)
		c.provision(uuid, map[string]any{"target": "provide"})
		n := c.waitState(uuid, proto.StateCleanFailed, 10*time.Second)
		le, _ := n["last_error"].(string)
		if !strings.Contains(le, "erase_devices") || !strings.Contains(le, "refused the secure erase") {
			t.Errorf("last_error = %q", le)
		}
	})
	t.Run("network data the agent cannot apply", func(t *testing.T) {
		c := startController(t, controllerOpts{})
		m := &machine{}
		uuid := c.enroll("node-netdata", "52:54:00:00:12:05", map[string]any{"driver_info": map[string]any{
			"preprovisioning_network_data": "interfaces:\n- name: br0\n  type: linux-bridge\n"}}, m)
		c.provision(uuid, map[string]any{"target": "manage"})
		c.waitState(uuid, proto.StateManageable, 10*time.Second)
		c.provision(uuid, map[string]any{"target": "provide"})
		n := c.waitState(uuid, proto.StateCleanFailed, 10*time.Second)
		if le, _ := n["last_error"].(string); !strings.Contains(le, "preprovisioning_network_data") || !strings.Contains(le, `type "linux-bridge" not supported`) {
			t.Errorf("last_error = %q", le)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.bootedAt) != 0 {
			t.Errorf("the ramdisk was booted %d times with network data it cannot apply", len(m.bootedAt))
		}
	})
	t.Run("callback timeout", func(t *testing.T) {
		c := startController(t, controllerOpts{callbackTimeout: time.Second})
		m := &machine{noBoot: true}
		uuid := c.enroll("node-timeout", "52:54:00:00:12:03", nil, m)
		c.provision(uuid, map[string]any{"target": "manage"})
		c.waitState(uuid, proto.StateManageable, 10*time.Second)
		c.provision(uuid, map[string]any{"target": "provide"})
		n := c.waitState(uuid, proto.StateCleanFailed, 10*time.Second)
		if le, _ := n["last_error"].(string); !strings.Contains(le, "Timeout reached while waiting for callback") {
			t.Errorf("last_error = %q", le)
		}
	})
	t.Run("agent dies mid-step", func(t *testing.T) {
		c := startController(t, controllerOpts{agentHeartbeatTimeout: time.Second})
		m := &machine{cfg: fakeagent.Config{StepBehavior: func(kind, step string, _ map[string]any) (any, error, time.Duration) {
			if step == "erase_devices" {
				return nil, nil, time.Hour
			}
			return nil, nil, 0
		}}}
		uuid := c.enroll("node-dies", "52:54:00:00:12:04", nil, m)
		c.provision(uuid, map[string]any{"target": "manage"})
		c.waitState(uuid, proto.StateManageable, 10*time.Second)
		c.provision(uuid, map[string]any{"target": "provide"})
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, n := c.call("GET", "/v1/nodes/"+uuid, nil)
			if cs, _ := n["clean_step"].(map[string]any); cs["step"] == "erase_devices" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("erase_devices never started: %v", n["clean_step"])
			}
			time.Sleep(20 * time.Millisecond)
		}
		m.mu.Lock()
		m.agent.Stop()
		m.mu.Unlock()
		n := c.waitState(uuid, proto.StateCleanFailed, 10*time.Second)
		if le, _ := n["last_error"].(string); !strings.Contains(le, "stopped heartbeating") {
			t.Errorf("last_error = %q", le)
		}
	})
	t.Run("abort in clean wait", func(t *testing.T) {
		c := startController(t, controllerOpts{})
		m := &machine{cfg: fakeagent.Config{StepBehavior: func(kind, step string, _ map[string]any) (any, error, time.Duration) {
			return nil, nil, time.Hour
		}}}
		uuid := c.enroll("node-abort", "52:54:00:00:12:05", nil, m)
		c.provision(uuid, map[string]any{"target": "manage"})
		c.waitState(uuid, proto.StateManageable, 10*time.Second)
		c.provision(uuid, map[string]any{"target": "provide"})
		c.waitState(uuid, proto.StateCleanWait, 10*time.Second)
		c.provision(uuid, map[string]any{"target": "abort"})
		n := c.waitState(uuid, proto.StateCleanFailed, 10*time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for n["power_state"] != "power off" && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			_, n = c.call("GET", "/v1/nodes/"+uuid, nil)
		}
		if n["power_state"] != "power off" {
			t.Errorf("aborted node left %v", n["power_state"])
		}
		if le, _ := n["last_error"].(string); !strings.Contains(le, "aborted") {
			t.Errorf("last_error = %q", le)
		}
	})
	t.Run("image without checksum", func(t *testing.T) {
		c := startController(t, controllerOpts{})
		m := &machine{}
		uuid := c.enroll("node-nochk", "52:54:00:00:12:06", map[string]any{"automated_clean": false,
			"instance_info": map[string]any{"image_source": "http://images.example/x.raw"}}, m)
		c.provision(uuid, map[string]any{"target": "manage"})
		c.waitState(uuid, proto.StateManageable, 10*time.Second)
		c.provision(uuid, map[string]any{"target": "provide"})
		c.waitState(uuid, proto.StateAvailable, 10*time.Second)
		c.provision(uuid, map[string]any{"target": "active"})
		n := c.waitState(uuid, proto.StateDeployFailed, 10*time.Second)
		if le, _ := n["last_error"].(string); !strings.Contains(le, "image_checksum") {
			t.Errorf("last_error = %q", le)
		}
	})
}

// TestPowerSync: a machine switched on behind Kiln's back shows its real
// power state after the next sync, with a history event.
func TestPowerSync(t *testing.T) {
	c := startController(t, controllerOpts{powerSync: 200 * time.Millisecond})
	m := &machine{}
	uuid := c.enroll("node-sync", "52:54:00:00:14:01", nil, m)
	c.provision(uuid, map[string]any{"target": "manage"})
	n := c.waitState(uuid, proto.StateManageable, 10*time.Second)
	if n["power_state"] != "power off" {
		t.Fatalf("power %v", n["power_state"])
	}
	m.mu.Lock()
	m.on = true // someone pressed the power button
	m.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, n = c.call("GET", "/v1/nodes/"+uuid, nil)
		if n["power_state"] == "power on" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("power state never synced: %v", n["power_state"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, h := c.call("GET", "/v1/nodes/"+uuid+"/history", nil)
	if !strings.Contains(fmt.Sprint(h), "according to its BMC") {
		t.Errorf("no history event for the sync: %v", h)
	}
}

// TestAbortWhileWaitingForTheAgent: abort from inspect wait (1.41+) fails the
// flow and powers the machine off; abort from wait call-back needs 1.110
// (TestAbortInWaitCallBack) and is refused with 406 at 1.95, as Ironic does.
func TestAbortWhileWaitingForTheAgent(t *testing.T) {
	c := startController(t, controllerOpts{})
	m := &machine{noBoot: true}
	uuid := c.enroll("node-abort-inspect", "52:54:00:00:16:01", map[string]any{"automated_clean": false,
		"instance_info": map[string]any{"image_source": "http://images.example/x.raw", "image_checksum": "0123456789abcdef0123456789abcdef"}}, m)
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "inspect"})
	c.waitState(uuid, proto.StateInspectWait, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "abort"})
	n := c.waitState(uuid, proto.StateInspectFailed, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for n["power_state"] != "power off" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		_, n = c.call("GET", "/v1/nodes/"+uuid, nil)
	}
	if n["power_state"] != "power off" {
		t.Errorf("after abort: power %v", n["power_state"])
	}

	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "provide"})
	c.waitState(uuid, proto.StateAvailable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "active"})
	c.waitState(uuid, proto.StateDeployWait, 10*time.Second)
	if code, out := c.call("PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "abort"}); code != 406 {
		t.Errorf("abort in wait call-back at 1.95: %d %v", code, out)
	}
	// The operator's way out at 1.95: undeploy.
	c.provision(uuid, map[string]any{"target": "deleted"})
	c.waitState(uuid, proto.StateAvailable, 15*time.Second)
}

// TestPregeneratedTokenForVirtualMedia: a boot interface whose media carry
// the agent token gets a pre-generated one; the agent's lookup then sees
// only "******" and heartbeats with the token from its command line.
func TestPregeneratedTokenForVirtualMedia(t *testing.T) {
	c := startController(t, controllerOpts{})
	m := &machine{}
	uuid := c.enroll("node-vmedia", "52:54:00:00:17:01", map[string]any{"boot_interface": "scripted-vmedia"}, m)
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "provide"})
	n := c.waitState(uuid, proto.StateAvailable, 10*time.Second)
	m.mu.Lock()
	a, token := m.agents[0], m.token
	m.mu.Unlock()
	if token == "" || a.Token() != token {
		t.Fatalf("agent token %q, media token %q", a.Token(), token)
	}
	if got := a.Executed(proto.StepClean); len(got) != 2 {
		t.Errorf("clean steps run with the pre-generated token: %v", got)
	}
	if dii := n["driver_internal_info"].(map[string]any); dii["agent_secret_token"] != nil || dii["agent_secret_token_pregenerated"] != nil {
		t.Errorf("token kept after cleaning: %v", dii)
	}
}
