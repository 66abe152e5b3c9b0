package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLIBIOS: kiln node bios set --wait runs bios.apply_configuration by
// manual cleaning on a fake-hardware node; bios list shows the result; a
// refused value fails the wait naming it; firmware list of a node without
// a firmware interface is an empty list.
func TestCLIBIOS(t *testing.T) {
	p := controller(t)
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "b1")
	mustCLI(t, p, "node", "manage", "--wait", "b1")
	out := mustCLI(t, p, "node", "bios", "set", "--wait", "b1", "SriovGlobalEnable=Enabled", "ProcVirtualization=Disabled")
	if !strings.Contains(out, "b1: manageable, power off — done") {
		t.Errorf("bios set --wait:\n%s", out)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, p, "node", "bios", "list", "b1", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, s := range list {
		got[s["name"].(string)] = s["value"]
	}
	if got["SriovGlobalEnable"] != "Enabled" || got["ProcVirtualization"] != "Disabled" || got["BootMode"] != "Uefi" {
		t.Errorf("bios list: %v", list)
	}
	table := mustCLI(t, p, "node", "bios", "list", "b1")
	if !strings.Contains(table, "ALLOWED VALUES") || !strings.Contains(table, "Enabled,Disabled") {
		t.Errorf("bios list table:\n%s", table)
	}
	out, _, code := cli(t, p, "node", "bios", "set", "--wait", "b1", "BootMode=Floppy")
	if code != 1 || !strings.Contains(out, "clean failed") || !strings.Contains(out, "BootMode: Floppy is not one of Uefi, Bios") {
		t.Errorf("bios set of a refused value: exit %d\n%s", code, out)
	}
	if _, errOut, code := cli(t, p, "node", "bios", "set", "b1", "novalue"); code == 0 || !strings.Contains(errOut, `"novalue" is not NAME=VALUE`) {
		t.Errorf("bios set without =: exit %d %s", code, errOut)
	}
	if out := mustCLI(t, p, "node", "firmware", "list", "b1", "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("firmware list of a fake node: %q", out)
	}
}
