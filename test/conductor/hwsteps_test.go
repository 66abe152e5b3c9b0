package conductor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	// The redfish hardware type, for the RAID test.
	_ "github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
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
	if le, _ := n["last_error"].(string); !strings.Contains(le, "step bios.apply_configuration failed") || !strings.Contains(le, "SriovGlobalEnable") {
		t.Errorf("last_error %q", le)
	}
}

// TestRAIDCleanStepsRecordRootDevice runs raid.create_configuration and
// raid.delete_configuration as manual clean steps of redfish nodes against
// the simulator, one per personality: the volumes are built through
// Storage/Volumes and task monitors, raid_config records them, the root
// volume becomes properties.root_device; a task that fails halfway fails
// the step with the task named.
func TestRAIDCleanStepsRecordRootDevice(t *testing.T) {
	c := startController(t, controllerOpts{})
	ctx := context.Background()
	for _, p := range bmcsim.PersonalityNames() {
		t.Run(p, func(t *testing.T) {
			lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: p, Disks: 3, TaskDuration: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lab.Close() })
			b := lab.BMCs[0]
			u, pw := b.Credentials()
			code, n := c.call("POST", "/v1/nodes", map[string]any{"name": "raid-" + p, "driver": "redfish", "deploy_interface": "ramdisk", "boot_interface": "fake",
				"driver_info": map[string]any{"redfish_address": b.URL, "redfish_username": u, "redfish_password": pw}})
			if code != 201 {
				t.Fatalf("create: %d %v", code, n)
			}
			uuid := n["uuid"].(string)
			// target_raid_config as PUT .../states/raid would leave it.
			if _, err := c.st.UpdateNode(ctx, uuid, func(n *proto.Node) error {
				n.TargetRAIDConfig = proto.Dict{"logical_disks": []any{
					map[string]any{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true},
					map[string]any{"size_gb": 4.0, "raid_level": "0"},
				}}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			c.provision(uuid, map[string]any{"target": "manage"})
			c.waitState(uuid, proto.StateManageable, 10*time.Second)
			before := lab.Requests()[0]
			start := time.Now()
			c.provision(uuid, map[string]any{"target": "clean", "clean_steps": []map[string]any{{"interface": "raid", "step": "create_configuration"}}})
			n = c.waitState(uuid, proto.StateManageable, 30*time.Second)
			t.Logf("personality %s: manual clean raid.create_configuration took %s and %d BMC requests", p, time.Since(start).Round(time.Millisecond), lab.Requests()[0]-before)
			if n["last_error"] != nil {
				t.Fatalf("last_error %v", n["last_error"])
			}
			lds, _ := n["raid_config"].(map[string]any)["logical_disks"].([]any)
			if len(lds) != 2 || lds[0].(map[string]any)["is_root_volume"] != true || lds[1].(map[string]any)["size_gb"] != 4.0 {
				t.Errorf("raid_config %v", n["raid_config"])
			}
			if rd := n["properties"].(map[string]any)["root_device"]; fmt.Sprint(rd) != "map[size:10]" {
				t.Errorf("properties.root_device %v, want the 10 GiB RAID-1 volume's size", rd)
			}

			c.provision(uuid, map[string]any{"target": "clean", "clean_steps": []map[string]any{{"interface": "raid", "step": "delete_configuration"}}})
			n = c.waitState(uuid, proto.StateManageable, 30*time.Second)
			if rc, _ := n["raid_config"].(map[string]any); n["last_error"] != nil || len(rc) != 0 {
				t.Errorf("after delete: raid_config %v last_error %v", n["raid_config"], n["last_error"])
			}

			if err := lab.SetFaults(bmcsim.Faults{TaskError: true}); err != nil {
				t.Fatal(err)
			}
			c.provision(uuid, map[string]any{"target": "clean", "clean_steps": []map[string]any{{"interface": "raid", "step": "create_configuration"}}})
			n = c.waitState(uuid, proto.StateCleanFailed, 30*time.Second)
			if le, _ := n["last_error"].(string); !strings.Contains(le, "step raid.create_configuration failed") || !strings.Contains(le, "TaskMonitors/") {
				t.Errorf("last_error %q", le)
			}
		})
	}
}

// TestFirmwareUpdateCleanStep runs firmware.update (BIOS, then the BMC,
// which drops every connection for 2 s while it resets) as a manual clean
// step of a redfish node and reads the components back through GET
// /v1/nodes/{id}/firmware: new current and last flashed versions, the
// initial ones kept.
func TestFirmwareUpdateCleanStep(t *testing.T) {
	c := startController(t, controllerOpts{})
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: "idrac", TaskDuration: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	if err := lab.SetFaults(bmcsim.Faults{ManagerResetDowntime: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	b := lab.BMCs[0]
	u, pw := b.Credentials()
	code, n := c.call("POST", "/v1/nodes", map[string]any{"name": "fw", "driver": "redfish", "deploy_interface": "ramdisk", "boot_interface": "fake",
		"driver_info": map[string]any{"redfish_address": b.URL, "redfish_username": u, "redfish_password": pw}})
	if code != 201 {
		t.Fatalf("create: %d %v", code, n)
	}
	uuid := n["uuid"].(string)
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	// A first cleaning caches the versions the machine came with.
	c.provision(uuid, map[string]any{"target": "clean", "clean_steps": []map[string]any{{"interface": "bios", "step": "apply_configuration",
		"args": map[string]any{"settings": []map[string]any{{"name": "ProcVirtualization", "value": "Disabled"}}}}}})
	c.waitState(uuid, proto.StateManageable, 30*time.Second)
	_, fw := c.call("GET", "/v1/nodes/"+uuid+"/firmware", nil)
	initial := map[string]string{}
	for _, x := range fw["firmware"].([]any) {
		m := x.(map[string]any)
		initial[m["component"].(string)] = fmt.Sprint(m["initial_version"])
	}
	if initial["bios"] == "" || initial["bmc"] == "" {
		t.Fatalf("firmware after the first clean: %v", fw)
	}

	start, before := time.Now(), lab.Requests()[0]
	c.provision(uuid, map[string]any{"target": "clean", "clean_steps": []map[string]any{{"interface": "firmware", "step": "update",
		"args": map[string]any{"settings": []map[string]any{
			{"component": "bios", "url": "http://images.example/bios-2.19.1.bin"},
			{"component": "bmc", "url": "http://images.example/bmc-7.10.30.bin"},
		}}}}})
	n = c.waitState(uuid, proto.StateManageable, 60*time.Second)
	t.Logf("idrac: manual clean firmware.update (bios + bmc with a 2 s BMC reset) took %s and %d BMC requests", time.Since(start).Round(time.Millisecond), lab.Requests()[0]-before)
	if n["last_error"] != nil {
		t.Fatalf("last_error %v", n["last_error"])
	}
	_, fw = c.call("GET", "/v1/nodes/"+uuid+"/firmware", nil)
	want := map[string]string{"bios": "2.19.1", "bmc": "7.10.30"}
	for _, x := range fw["firmware"].([]any) {
		m := x.(map[string]any)
		name := m["component"].(string)
		if _, flashed := want[name]; !flashed {
			// The network adapter's firmware, not flashed: unchanged.
			if m["current_version"] != initial[name] || m["last_version_flashed"] != nil {
				t.Errorf("firmware %s, not flashed, after the update: %v (initial was %s)", name, m, initial[name])
			}
			continue
		}
		if m["current_version"] != want[name] || m["last_version_flashed"] != want[name] || m["initial_version"] != initial[name] {
			t.Errorf("firmware %s after the update: %v (initial was %s)", name, m, initial[name])
		}
	}
}

// TestSecureBootOnForDeployOffForCleaning: a redfish node whose
// capabilities ask for secure_boot gets UEFI Secure Boot turned on before
// its instance (a ramdisk) boots and off when it is cleaned, on the BMC
// and in the node's secure_boot field; in between, management.reset_bmc
// runs as a service step.
func TestSecureBootOnForDeployOffForCleaning(t *testing.T) {
	c := startController(t, controllerOpts{})
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: "ilo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	b := lab.BMCs[0]
	u, pw := b.Credentials()
	code, n := c.call("POST", "/v1/nodes", map[string]any{"name": "sb", "driver": "redfish", "deploy_interface": "ramdisk", "boot_interface": "fake",
		"properties":  map[string]any{"capabilities": "boot_mode:uefi,secure_boot:true"},
		"driver_info": map[string]any{"redfish_address": b.URL, "redfish_username": u, "redfish_password": pw}})
	if code != 201 {
		t.Fatalf("create: %d %v", code, n)
	}
	uuid := n["uuid"].(string)
	sbPath := "/redfish/v1/Systems/" + b.SystemIDs()[0] + "/SecureBoot"
	enabled := func() bool {
		req, _ := http.NewRequest("GET", b.URL+sbPath, nil)
		req.SetBasicAuth(u, pw)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb struct{ SecureBootEnable bool }
		if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil {
			t.Fatal(err)
		}
		return sb.SecureBootEnable
	}
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "provide"})
	c.waitState(uuid, proto.StateAvailable, 20*time.Second)
	if enabled() {
		t.Fatal("secure boot on before deploy")
	}
	c.provision(uuid, map[string]any{"target": "active"})
	n = c.waitState(uuid, proto.StateActive, 20*time.Second)
	if !enabled() || n["secure_boot"] != true {
		t.Errorf("after deploy: BMC SecureBootEnable %v, node secure_boot %v", enabled(), n["secure_boot"])
	}
	// management.reset_bmc as a service step: the BMC drops connections
	// for 2 s; the node goes back to active.
	if err := lab.SetFaults(bmcsim.Faults{ManagerResetDowntime: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	before, start := lab.Requests()[0], time.Now()
	c.provision(uuid, map[string]any{"target": "service", "service_steps": []map[string]any{{"interface": "management", "step": "reset_bmc"}}})
	n = c.waitState(uuid, proto.StateActive, 30*time.Second)
	t.Logf("ilo: service step management.reset_bmc (2 s down) took %s and %d BMC requests", time.Since(start).Round(time.Millisecond), lab.Requests()[0]-before)
	if n["last_error"] != nil || lab.Requests()[0] == before {
		t.Errorf("after reset_bmc: last_error %v, %d requests", n["last_error"], lab.Requests()[0]-before)
	}
	c.provision(uuid, map[string]any{"target": "deleted"})
	n = c.waitState(uuid, proto.StateAvailable, 20*time.Second)
	if enabled() || n["secure_boot"] != false {
		t.Errorf("after undeploy and cleaning: BMC SecureBootEnable %v, node secure_boot %v", enabled(), n["secure_boot"])
	}
}
