package conductor_test

import (
	"context"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// TestHardwareStepsPerPersonality runs every out-of-band hardware step as
// a manual clean of a redfish node (ramdisk deploy: no agent), one node
// per simulator personality, and logs each step's wall time and the BMC
// requests it took (the clean's power-off and cache refresh included):
// the figures of docs/hardware-config.md. Each step must succeed.
func TestHardwareStepsPerPersonality(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the per-personality measurement runs every hardware step")
	}
	c := startController(t, controllerOpts{})
	ctx := context.Background()
	steps := []struct {
		name string
		step map[string]any
	}{
		{"bios.apply_configuration", map[string]any{"interface": "bios", "step": "apply_configuration",
			"args": map[string]any{"settings": []map[string]any{{"name": "ProcVirtualization", "value": "Disabled"}}}}},
		{"bios.factory_reset", map[string]any{"interface": "bios", "step": "factory_reset"}},
		{"raid.create_configuration", map[string]any{"interface": "raid", "step": "create_configuration"}},
		{"raid.delete_configuration", map[string]any{"interface": "raid", "step": "delete_configuration"}},
		{"firmware.update (bios)", map[string]any{"interface": "firmware", "step": "update",
			"args": map[string]any{"settings": []map[string]any{{"component": "bios", "url": "http://images.example/bios-9.9.9.bin"}}}}},
		{"management.reset_bmc", map[string]any{"interface": "management", "step": "reset_bmc"}},
	}
	for _, p := range bmcsim.PersonalityNames() {
		t.Run(p, func(t *testing.T) {
			lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: p, Disks: 3, TaskDuration: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lab.Close() })
			b := lab.BMCs[0]
			u, pw := b.Credentials()
			code, n := c.call("POST", "/v1/nodes", map[string]any{"name": "m-" + p, "driver": "redfish", "deploy_interface": "ramdisk", "boot_interface": "fake",
				"driver_info": map[string]any{"redfish_address": b.URL, "redfish_username": u, "redfish_password": pw}})
			if code != 201 {
				t.Fatalf("create: %d %v", code, n)
			}
			uuid := n["uuid"].(string)
			if _, err := c.st.UpdateNode(ctx, uuid, func(n *proto.Node) error {
				n.TargetRAIDConfig = proto.Dict{"logical_disks": []any{map[string]any{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true}}}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			c.provision(uuid, map[string]any{"target": "manage"})
			c.waitState(uuid, proto.StateManageable, 10*time.Second)
			for _, s := range steps {
				before, start := lab.Requests()[0], time.Now()
				c.provision(uuid, map[string]any{"target": "clean", "clean_steps": []map[string]any{s.step}})
				n := c.waitState(uuid, proto.StateManageable, 60*time.Second)
				t.Logf("%-10s %-26s %8s %4d BMC requests", p, s.name, time.Since(start).Round(time.Millisecond), lab.Requests()[0]-before)
				if n["last_error"] != nil {
					t.Errorf("%s: last_error %v", s.name, n["last_error"])
				}
			}
		})
	}
}
