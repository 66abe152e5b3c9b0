package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestIronicCommandSet posts every command Ironic's agent_client.py sends
// (2023.1 through 2025.2), as it sends them, and checks what Ironic parses:
// 200 with IPA's five-key result whose command_name is the part after the
// dot (get_last_command_status matches on it), a FAILED result's
// command_error a dict with details or message (get_command_error), and the
// same result in the token-less status list Ironic 2023.1 polls.
func TestIronicCommandSet(t *testing.T) {
	e := newAPIEnv(t, func(_ *Config, d *Deps) { d.LogFiles = []string{} })
	node := map[string]any{"uuid": testNode, "driver_internal_info": map[string]any{}, "instance_info": map[string]any{}}
	stepParams := func(iface string) map[string]any {
		return map[string]any{"node": node, "ports": []any{},
			"step": map[string]any{"step": "erase_devices_express", "interface": iface, "priority": 0, "args": map[string]any{}}}
	}
	for _, c := range []struct {
		method string
		params map[string]any
		wait   bool
		status proto.CommandStatus // "" when SUCCEEDED or FAILED are both acceptable here
	}{
		{"clean.get_clean_steps", map[string]any{"node": node, "ports": []any{}}, true, proto.CommandSucceeded},
		{"deploy.get_deploy_steps", map[string]any{"node": node, "ports": []any{}}, true, proto.CommandSucceeded},
		{"service.get_service_steps", map[string]any{"node": node, "ports": []any{}}, true, proto.CommandSucceeded},
		{"clean.execute_clean_step", stepParams("deploy"), false, ""},
		{"deploy.execute_deploy_step", stepParams("deploy"), false, ""},
		{"service.execute_service_step", stepParams("deploy"), false, ""},
		{"standby.get_partition_uuids", map[string]any{}, true, ""}, // no image writer in this agent
		{"standby.sync", map[string]any{}, true, proto.CommandSucceeded},
		{"log.collect_system_logs", map[string]any{}, true, proto.CommandSucceeded},
		{"image.install_bootloader", map[string]any{"root_uuid": "0x12345678", "efi_system_part_uuid": nil, "prep_boot_part_uuid": nil, "target_boot_mode": "uefi"}, false, ""},
		{"rescue.finalize_rescue", map[string]any{"rescue_password": "$6$salt$hash", "hashed": true}, true, ""},
		// Outside a ramdisk these refuse; what matters is the shape.
		{"standby.power_off", map[string]any{}, false, ""},
		{"standby.run_image", map[string]any{}, false, ""},
		{"system.lockdown", map[string]any{}, true, proto.CommandSucceeded}, // last: it stops the agent
	} {
		t.Run(c.method, func(t *testing.T) {
			code, r, f := e.run(t, c.method, c.params, c.wait)
			if code != 200 {
				t.Fatalf("%s: HTTP %d %+v", c.method, code, f)
			}
			if _, cmd, _ := strings.Cut(c.method, "."); r.CommandName != cmd {
				t.Fatalf("command_name %q, Ironic looks for %q", r.CommandName, cmd)
			}
			if r.CommandStatus == proto.CommandRunning {
				cmdDone(t, e, r.ID)
			}
			var list struct {
				Commands []json.RawMessage `json:"commands"`
			}
			if code := e.call(t, "GET", "/v1/commands/", nil, &list); code != 200 {
				t.Fatalf("token-less status read: %d", code)
			}
			var last proto.CommandResult
			raw := list.Commands[len(list.Commands)-1]
			checkResultKeys(t, raw)
			if err := json.Unmarshal(raw, &last); err != nil || last.ID != r.ID {
				t.Fatalf("last listed command %s, want %s", raw, r.ID)
			}
			switch last.CommandStatus {
			case proto.CommandSucceeded:
			case proto.CommandFailed:
				if last.CommandError == nil || (last.CommandError.Details == "" && last.CommandError.Message == "") {
					t.Fatalf("FAILED without details or message: %s", raw)
				}
			default:
				t.Fatalf("status %q", last.CommandStatus)
			}
			if c.status != "" && last.CommandStatus != c.status {
				t.Fatalf("status %s (%+v), want %s", last.CommandStatus, last.CommandError, c.status)
			}
		})
	}
}

// cmdDone waits for a command through GET /v1/commands/{id}?wait=true.
func cmdDone(t *testing.T, e *apiEnv, id string) {
	t.Helper()
	var r proto.CommandResult
	if code := e.call(t, "GET", "/v1/commands/"+id+"?wait=true", nil, &r); code != 200 || r.CommandStatus == proto.CommandRunning {
		t.Fatalf("wait for %s: %d %+v", id, code, r)
	}
}
