package osclient_test

import (
	"strings"
	"testing"
)

// TestSessionHardware: the hardware views and BMC actions of a
// fake-hardware node: BIOS settings after a manual clean that changed one,
// an NMI, the boot mode and secure boot changes (asynchronous: the node's
// fields follow), each output checked.
func TestSessionHardware(t *testing.T) {
	t.Parallel()
	o := newOSC(t)
	o.obj("node", "create", "--driver", "fake-hardware", "--name", "hw-1")
	o.ok("node", "manage", "hw-1", "--wait", "60")
	o.ok("node", "clean", "hw-1", "--wait", "60", "--clean-steps",
		`[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"ProcVirtualization","value":"Disabled"}]}}]`)
	expectState(t, o, "hw-1", "manageable")
	settings := o.list("node", "bios", "setting", "list", "hw-1")
	values := map[string]any{}
	for _, s := range settings {
		values[s["BIOS setting name"].(string)] = s["BIOS setting value"]
	}
	if values["ProcVirtualization"] != "Disabled" || values["BootMode"] != "Uefi" {
		t.Errorf("node bios setting list: %v", settings)
	}
	if s := o.obj("node", "bios", "setting", "show", "hw-1", "ProcVirtualization"); s["name"] != "ProcVirtualization" || s["value"] != "Disabled" {
		t.Errorf("node bios setting show: %v", s)
	}
	o.fails("(HTTP 404)", "node", "bios", "setting", "show", "hw-1", "NoSuchSetting")

	if out := o.ok("node", "inject", "nmi", "hw-1"); strings.TrimSpace(out) != "" {
		t.Errorf("node inject nmi printed %q", out)
	}
	o.fails("(HTTP 404)", "node", "inject", "nmi", "no-such-node")

	o.ok("node", "boot", "mode", "set", "hw-1", "bios")
	waitField(t, o, "hw-1", "boot_mode", "bios")
	o.ok("node", "secure", "boot", "on", "hw-1")
	waitFieldBool(t, o, "hw-1", "secure_boot", true)
	o.ok("node", "secure", "boot", "off", "hw-1")
	waitFieldBool(t, o, "hw-1", "secure_boot", false)
	if n := o.obj("node", "show", "hw-1", "--fields", "boot_mode", "secure_boot", "last_error"); n["boot_mode"] != "bios" || n["last_error"] != nil {
		t.Errorf("node show after the changes: %v", n)
	}
}

// waitFieldBool is waitField for a boolean field.
func waitFieldBool(t *testing.T, o *osc, node, field string, want bool) {
	t.Helper()
	var last any
	for range 100 {
		last = o.obj("node", "show", node, "--fields", field)[field]
		if last == want {
			return
		}
	}
	t.Fatalf("node %s: %s stayed %v, want %v", node, field, last, want)
}
