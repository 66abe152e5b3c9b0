package osclient_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBaremetalSession runs every `openstack baremetal` sub-command of
// nodes, ports, drivers and conductors that needs no real hardware
// against a real kiln serve (fake-hardware nodes), checking what each
// prints. Chassis are TestChassisOpenstackClient's (test/api). The
// sub-commands of resources Kiln does not serve yet (docs/api.md lists
// their endpoints) are left out.
//
// The session is split in parts, each on its own controller, that run in
// parallel: every command starts a Python interpreter, which is slow.
func TestSessionDriversAndConductors(t *testing.T) {
	t.Parallel()
	o := newOSC(t)
	if names := column(o.list("driver", "list"), "Supported driver(s)"); !slices.Contains(names, "fake-hardware") {
		t.Errorf("driver list: %v", names)
	}
	drv := o.obj("driver", "show", "fake-hardware")
	if drv["name"] != "fake-hardware" || drv["default_power_interface"] != "fake" || !strings.Contains(fmt.Sprint(drv["hosts"]), "osc-conductor") {
		t.Errorf("driver show: %v", drv)
	}
	props := o.list("driver", "property", "list", "fake-hardware")
	if !slices.Contains(column(props, "Property"), "deploy_kernel") {
		t.Errorf("driver property list: %v", props)
	}
	raidProps := o.list("driver", "raid", "property", "list", "fake-hardware")
	if got := column(raidProps, "Property"); !slices.Contains(got, "raid_level") || !slices.Contains(got, "size_gb") {
		t.Errorf("driver raid property list: %v", got)
	}
	if out := o.ok("driver", "passthru", "list", "fake-hardware", "-f", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("driver passthru list: %q", out)
	}
	o.fails("No handler for method reset_bmc (HTTP 400)", "driver", "passthru", "call", "fake-hardware", "reset_bmc")
	if hosts := column(o.list("conductor", "list"), "Hostname"); !slices.Equal(hosts, []string{"osc-conductor"}) {
		t.Errorf("conductor list: %v", hosts)
	}
	cond := o.obj("conductor", "show", "osc-conductor")
	if cond["hostname"] != "osc-conductor" || cond["alive"] != true || !strings.Contains(fmt.Sprint(cond["drivers"]), "fake-hardware") {
		t.Errorf("conductor show: %v", cond)
	}
	o.fails("Conductor nowhere could not be found. (HTTP 404)", "conductor", "show", "nowhere")
}

// TestSessionNodesAndPorts: node and port create, list, show, set,
// unset, validate, bulk create and delete.
func TestSessionNodesAndPorts(t *testing.T) {
	t.Parallel()
	o := newOSC(t)
	n := o.obj("node", "create", "--driver", "fake-hardware", "--name", "osc-1", "--resource-class", "gold",
		"--property", "cpus=8", "--extra", "rack=r1", "--driver-info", "ipmi_password=s3cret")
	id, _ := n["uuid"].(string)
	if id == "" || n["name"] != "osc-1" || n["provision_state"] != "enroll" || n["resource_class"] != "gold" ||
		fmt.Sprint(n["driver_info"]) != "map[ipmi_password:******]" {
		t.Fatalf("node create: %v", n)
	}
	o.obj("node", "create", "--driver", "fake-hardware", "--name", "osc-2")
	o.ok("node", "set", "osc-1", "--owner", "team-a")
	rows := o.list("node", "list")
	if names := column(rows, "Name"); !slices.Equal(names, []string{"osc-1", "osc-2"}) {
		t.Errorf("node list: %v", names)
	}
	if names := column(o.list("node", "list", "--resource-class", "gold"), "Name"); !slices.Equal(names, []string{"osc-1"}) {
		t.Errorf("node list --resource-class gold: %v", names)
	}
	if names := column(o.list("node", "list", "--owner", "team-a", "--long"), "Name"); !slices.Equal(names, []string{"osc-1"}) {
		t.Errorf("node list --owner --long: %v", names)
	}
	o.ok("node", "set", "osc-1", "--description", "first node", "--extra", "row=2", "--instance-info", "display_name=web-1")
	o.ok("node", "unset", "osc-1", "--extra", "rack")
	n = o.obj("node", "show", "osc-1")
	if n["description"] != "first node" || fmt.Sprint(n["extra"]) != "map[row:2]" || fmt.Sprint(n["instance_info"]) != "map[display_name:web-1]" {
		t.Errorf("node show after set/unset: description %v extra %v instance_info %v", n["description"], n["extra"], n["instance_info"])
	}
	if v := o.obj("node", "show", "osc-1", "--fields", "uuid", "name"); len(v) != 2 || v["name"] != "osc-1" {
		t.Errorf("node show --fields: %v", v)
	}
	val := o.list("node", "validate", "osc-1")
	if ifaces := column(val, "Interface"); !slices.Contains(ifaces, "power") || !slices.Contains(ifaces, "deploy") {
		t.Errorf("node validate: %v", val)
	}

	// Ports.
	p := o.obj("port", "create", "52:54:00:aa:bb:01", "--node", id, "--extra", "switch=s1", "--physical-network", "physnet1")
	pid, _ := p["uuid"].(string)
	if pid == "" || p["address"] != "52:54:00:aa:bb:01" || p["node_uuid"] != id || p["physical_network"] != "physnet1" {
		t.Fatalf("port create: %v", p)
	}
	if addrs := column(o.list("port", "list", "--node", id), "Address"); !slices.Equal(addrs, []string{"52:54:00:aa:bb:01"}) {
		t.Errorf("port list --node: %v", addrs)
	}
	if addrs := column(o.list("port", "list", "--address", "52:54:00:aa:bb:01", "--long"), "Address"); len(addrs) != 1 {
		t.Errorf("port list --address --long: %v", addrs)
	}
	o.ok("port", "set", pid, "--extra", "vlan=10", "--pxe-enabled")
	o.ok("port", "unset", pid, "--extra", "switch")
	p = o.obj("port", "show", pid)
	if fmt.Sprint(p["extra"]) != "map[vlan:10]" || p["pxe_enabled"] != true {
		t.Errorf("port show after set/unset: %v", p)
	}
	if p = o.obj("port", "show", "--address", "52:54:00:aa:bb:01"); p["uuid"] != pid {
		t.Errorf("port show --address: %v", p)
	}
	o.fails("already exists", "port", "create", "52:54:00:aa:bb:01", "--node", id)

	// Bulk creation from a file.
	bulk := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(bulk, []byte("nodes:\n  - driver: fake-hardware\n    name: bulk-1\n    ports:\n      - address: 52:54:00:aa:bb:02\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.ok("create", bulk)
	if p := o.obj("port", "show", "--address", "52:54:00:aa:bb:02"); p["node_uuid"] != o.obj("node", "show", "bulk-1")["uuid"] {
		t.Errorf("baremetal create: port %v", p)
	}

	// Deletes, and what is gone answers 404.
	o.ok("port", "delete", pid)
	o.fails("could not be found. (HTTP 404)", "port", "show", pid)
	if out := o.ok("node", "delete", "osc-2", "bulk-1"); !strings.Contains(out, "Deleted node osc-2") || !strings.Contains(out, "Deleted node bulk-1") {
		t.Errorf("node delete printed %q", out)
	}
	o.fails("Node osc-2 could not be found. (HTTP 404)", "node", "show", "osc-2")
	if names := column(o.list("node", "list"), "Name"); !slices.Equal(names, []string{"osc-1"}) {
		t.Errorf("node list after deletes: %v", names)
	}
}

// TestSessionNodeControls: power, boot device, maintenance, console,
// vendor passthru and the target RAID configuration.
func TestSessionNodeControls(t *testing.T) {
	t.Parallel()
	o := newOSC(t)
	n := o.obj("node", "create", "--driver", "fake-hardware", "--name", "osc-1")
	o.ok("node", "power", "on", "osc-1", "--power-timeout", "30")
	waitField(t, o, "osc-1", "power_state", "power on")
	o.ok("node", "reboot", "osc-1")
	waitField(t, o, "osc-1", "power_state", "power on")
	o.ok("node", "power", "off", "osc-1")
	waitField(t, o, "osc-1", "power_state", "power off")
	o.ok("node", "boot", "device", "set", "osc-1", "pxe", "--persistent")
	if bd := o.obj("node", "boot", "device", "show", "osc-1"); bd["boot_device"] != "pxe" || bd["persistent"] != true {
		t.Errorf("node boot device show: %v", bd)
	}
	if sup := o.obj("node", "boot", "device", "show", "osc-1", "--supported"); !strings.Contains(fmt.Sprint(sup["supported_boot_devices"]), "disk") {
		t.Errorf("node boot device show --supported: %v", sup)
	}
	o.ok("node", "maintenance", "set", "osc-1", "--reason", "fan swap")
	if n = o.obj("node", "show", "osc-1"); n["maintenance"] != true || n["maintenance_reason"] != "fan swap" {
		t.Errorf("after maintenance set: %v %v", n["maintenance"], n["maintenance_reason"])
	}
	o.ok("node", "maintenance", "unset", "osc-1")
	if n = o.obj("node", "show", "osc-1"); n["maintenance"] != false || n["maintenance_reason"] != nil {
		t.Errorf("after maintenance unset: %v %v", n["maintenance"], n["maintenance_reason"])
	}
	if c := o.obj("node", "console", "show", "osc-1"); c["console_enabled"] != false || c["console_info"] != nil {
		t.Errorf("console show: %v", c)
	}
	o.ok("node", "console", "enable", "osc-1")
	if c := o.obj("node", "console", "show", "osc-1"); c["console_enabled"] != true {
		t.Errorf("console show after enable: %v", c)
	}
	o.ok("node", "console", "disable", "osc-1")
	if c := o.obj("node", "console", "show", "osc-1"); c["console_enabled"] != false {
		t.Errorf("console show after disable: %v", c)
	}
	if out := o.ok("node", "passthru", "list", "osc-1", "-f", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("node passthru list: %q", out)
	}
	o.fails("No handler for method clear_sel (HTTP 400)", "node", "passthru", "call", "osc-1", "clear_sel")

	// RAID: node set --target-raid-config.
	raidFile := filepath.Join(t.TempDir(), "raid.json")
	if err := os.WriteFile(raidFile, []byte(`{"logical_disks":[{"size_gb":100,"raid_level":"1","is_root_volume":true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o.ok("node", "set", "osc-1", "--target-raid-config", raidFile)
	if n = o.obj("node", "show", "osc-1", "--fields", "target_raid_config"); !strings.Contains(fmt.Sprint(n["target_raid_config"]), "raid_level:1") {
		t.Errorf("target_raid_config after set: %v", n)
	}
	o.fails("RAID config validation error", "node", "set", "osc-1", "--target-raid-config", `{"logical_disks":[{"raid_level":"9","size_gb":1}]}`)
}

// TestSessionProvisioning: the provision verbs on fake hardware, waiting
// as an operator would, node history, and a delete refused while active.
func TestSessionProvisioning(t *testing.T) {
	t.Parallel()
	o := newOSC(t)
	o.obj("node", "create", "--driver", "fake-hardware", "--name", "osc-1")
	o.obj("node", "create", "--driver", "fake-hardware", "--name", "osc-2")
	o.ok("node", "manage", "osc-1", "--wait", "60")
	expectState(t, o, "osc-1", "manageable")
	o.ok("node", "inspect", "osc-1", "--wait", "60")
	expectState(t, o, "osc-1", "manageable")
	o.ok("node", "clean", "osc-1", "--clean-steps", `[{"interface":"deploy","step":"erase_devices_metadata"}]`, "--wait", "60")
	expectState(t, o, "osc-1", "manageable")
	o.ok("node", "provide", "osc-1", "--wait", "60")
	expectState(t, o, "osc-1", "available")
	o.ok("node", "deploy", "osc-1", "--wait", "60")
	expectState(t, o, "osc-1", "active")
	o.ok("node", "rebuild", "osc-1", "--wait", "60")
	expectState(t, o, "osc-1", "active")
	o.ok("node", "rescue", "osc-1", "--rescue-password", "pw", "--wait", "60")
	expectState(t, o, "osc-1", "rescue")
	o.ok("node", "unrescue", "osc-1", "--wait", "60")
	expectState(t, o, "osc-1", "active")
	o.fails("(HTTP 400)", "node", "abort", "osc-1")
	o.ok("node", "undeploy", "osc-1", "--wait", "60")
	expectState(t, o, "osc-1", "available")
	o.ok("node", "manage", "osc-2", "--wait", "60")
	o.ok("node", "adopt", "osc-2", "--wait", "60")
	expectState(t, o, "osc-2", "active")

	// History.
	hist := o.list("node", "history", "list", "osc-1")
	if len(hist) == 0 {
		t.Fatal("node history list: empty")
	}
	first, _ := hist[0]["UUID"].(string)
	if ev := o.obj("node", "history", "get", "osc-1", first); ev["uuid"] != first || ev["event"] == nil {
		t.Errorf("node history get: %v", ev)
	}

	o.fails("(HTTP 409)", "node", "delete", "osc-2") // active: refused
	o.ok("node", "maintenance", "set", "osc-2")
	if out := o.ok("node", "delete", "osc-2"); !strings.Contains(out, "Deleted node osc-2") {
		t.Errorf("node delete in maintenance printed %q", out)
	}
}

// expectState checks a node's provision state after a --wait command.
func expectState(t *testing.T, o *osc, node, want string) {
	t.Helper()
	if n := o.obj("node", "show", node, "--fields", "provision_state", "last_error"); n["provision_state"] != want {
		t.Fatalf("node %s: provision_state %v (last_error %v), want %s", node, n["provision_state"], n["last_error"], want)
	}
}

// waitField polls node show until field has the wanted value; the
// deadline is only a safety net.
func waitField(t *testing.T, o *osc, node, field, want string) {
	t.Helper()
	var last any
	for range 100 {
		last = o.obj("node", "show", node, "--fields", field)[field]
		if last == want {
			return
		}
	}
	t.Fatalf("node %s: %s stayed %v, want %s", node, field, last, want)
}
