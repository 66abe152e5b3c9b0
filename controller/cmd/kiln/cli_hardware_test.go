package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/bmcsim"
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
	// Cleaning ended by reading the fake firmware interface's components.
	var fw []map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, p, "node", "firmware", "list", "b1", "-o", "json")), &fw); err != nil {
		t.Fatal(err)
	}
	var comps []string
	for _, c := range fw {
		comps = append(comps, fmt.Sprint(c["component"], "=", c["current"]))
	}
	if got := strings.Join(comps, " "); got != "NIC:FAKE0001=22.0.9 bios=1.0.0 bmc=1.0.0" {
		t.Errorf("firmware list of a fake node: %s", got)
	}
}

// TestCLIRAID: kiln node raid set stores target_raid_config (JSON or
// @FILE), refuses what is not a JSON object or what the API's RAID schema
// refuses, and with --apply --wait builds it on a redfish node against
// the simulator by manual cleaning: raid_config and the root device
// follow.
func TestCLIRAID(t *testing.T) {
	p := controller(t)
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "f1")
	out := mustCLI(t, p, "node", "raid", "set", "f1", `{"logical_disks":[{"size_gb":100,"raid_level":"1","is_root_volume":true}]}`)
	if !strings.Contains(out, "Set the target RAID configuration of node f1") {
		t.Errorf("raid set printed %q", out)
	}
	var n map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, p, "node", "show", "f1", "-o", "json")), &n); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(n["target_raid_config"]) != "map[logical_disks:[map[is_root_volume:true raid_level:1 size_gb:100]]]" {
		t.Errorf("target_raid_config after raid set: %v", n["target_raid_config"])
	}
	if _, errOut, code := cli(t, p, "node", "raid", "set", "f1", `[1,2]`); code == 0 || !strings.Contains(errOut, "not a JSON object") {
		t.Errorf("raid set of a list: exit %d %s", code, errOut)
	}
	if _, errOut, code := cli(t, p, "node", "raid", "set", "f1", `{"logical_disks":[{"size_gb":1,"raid_level":"9"}]}`); code == 0 || !strings.Contains(errOut, "RAID config validation error") {
		t.Errorf("raid set of RAID level 9: exit %d %s", code, errOut)
	}

	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: "generic", Disks: 3, TaskDuration: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	b := lab.BMCs[0]
	u, pw := b.Credentials()
	mustCLI(t, p, "node", "create", "--driver", "redfish", "--name", "r1", "--deploy-interface", "ramdisk", "--boot-interface", "fake",
		"--driver-info", "redfish_address="+b.URL, "--driver-info", "redfish_username="+u, "--driver-info", "redfish_password="+pw)
	mustCLI(t, p, "node", "manage", "--wait", "r1")
	file := filepath.Join(t.TempDir(), "raid.json")
	if err := os.WriteFile(file, []byte(`{"logical_disks":[{"size_gb":"MAX","raid_level":"1","is_root_volume":true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out = mustCLI(t, p, "node", "raid", "set", "--apply", "--wait", "r1", "@"+file)
	if !strings.Contains(out, "r1: manageable, power off — done") {
		t.Errorf("raid set --apply --wait:\n%s", out)
	}
	if err := json.Unmarshal([]byte(mustCLI(t, p, "node", "show", "r1", "-o", "json")), &n); err != nil {
		t.Fatal(err)
	}
	lds, _ := n["raid_config"].(map[string]any)["logical_disks"].([]any)
	if len(lds) != 1 || lds[0].(map[string]any)["is_root_volume"] != true || n["properties"].(map[string]any)["root_device"] == nil {
		t.Errorf("after raid set --apply: raid_config %v properties %v", n["raid_config"], n["properties"])
	}
}
