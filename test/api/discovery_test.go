package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
)

// discoveryRules are what an operator of a Dell rack writes: machines whose
// BMC sits in the lab range get the ipmi driver and its credentials and a
// name; a vendor the rack does not hold is refused.
const discoveryRules = `
- uuid: lab-bmc
  description: BMCs in 10.20.0.0/16 are ours
  sensitive: true
  conditions:
    - op: in-net
      args: {address: "{inventory[bmc_address]}", subnet: 10.20.0.0/16}
    - op: is-true
      args: {value: "{plugin_data[auto_discovered]}"}
  actions:
    - op: set-attribute
      args: {path: /driver, value: ipmi}
    - op: set-attribute
      args: {path: "{item[path]}", value: "{item[value]}"}
      loop:
        - {path: /driver_info/ipmi_address, value: "{inventory[bmc_address]}"}
        - {path: /driver_info/ipmi_username, value: admin}
        - {path: /driver_info/ipmi_password, value: s3cret-from-rule}
    - op: set-attribute
      args: {path: /name, value: "rack1-{inventory[system_vendor][serial_number]}"}
    - op: add-trait
      args: {name: CUSTOM_DISCOVERED}
- uuid: not-ours
  priority: 10
  conditions:
    - op: "!contains"
      args: {value: "{inventory[system_vendor][manufacturer]}", regex: "(?i)dell"}
  actions:
    - op: fail
      args: {msg: "vendor {inventory[system_vendor][manufacturer]} is not racked here"}
`

func discoveryInventory(vendor, serial, bmc string, macs ...string) string {
	var ifaces []string
	for i, m := range macs {
		ifaces = append(ifaces, fmt.Sprintf(`{"name": "eno%d", "mac_address": %q, "ipv4_address": "10.77.0.%d"}`, i+1, m, 100+i))
	}
	return fmt.Sprintf(`{"inventory": {
		"interfaces": [%s],
		"cpu": {"count": 16, "architecture": "x86_64"},
		"memory": {"physical_mb": 32768, "total": 34359738368},
		"disks": [{"name": "/dev/sda", "size": 480103981056}],
		"bmc_address": %q,
		"system_vendor": {"manufacturer": %q, "product_name": "PowerEdge R650", "serial_number": %q},
		"boot": {"pxe_interface": %q, "current_boot_mode": "uefi"}},
	  "root_disk": {"name": "/dev/sda"}}`, strings.Join(ifaces, ","), bmc, vendor, serial, macs[0])
}

// TestDiscoveryEnrollsUnknownMachines: with --boot-unknown discovery, an
// inspection report from a machine no node has enrolls it — a node in
// enroll with its inventory, scheduling properties, PXE port and the
// fields the operator's rules set — and a machine a rule refuses is not
// enrolled.
func TestDiscoveryEnrollsUnknownMachines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(discoveryRules), 0o600); err != nil {
		t.Fatal(err)
	}
	k := &kiln{Proc: kilnproc.Start(t, kilnBin, filepath.Join(dir, "kiln.db"),
		"--conductor", "disco", "--boot-unknown", "discovery", "--inspection-rules", rules), t: t}

	code, hdr, b := k.call("POST", "/v1/continue_inspection", discoveryInventory("Dell Inc.", "ABC1234", "10.20.3.4", "52:54:00:d1:00:01", "52:54:00:d1:00:02"))
	if code != http.StatusAccepted {
		t.Fatalf("continue_inspection of an unknown machine: %d %s", code, b)
	}
	id, _ := mustJSON(t, b)["uuid"].(string)
	if id == "" || !strings.HasSuffix(hdr.Get("Location"), "/v1/nodes/"+id) {
		t.Fatalf("answer %s, Location %q", b, hdr.Get("Location"))
	}
	_, _, b = k.call("GET", "/v1/nodes/"+id, "")
	n := mustJSON(t, b)
	di, _ := n["driver_info"].(map[string]any)
	props, _ := n["properties"].(map[string]any)
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"provision_state", n["provision_state"], "enroll"},
		{"driver (from the rule)", n["driver"], "ipmi"},
		{"power_interface (the rule's driver's default)", n["power_interface"], "ipmitool"},
		{"name", n["name"], "rack1-ABC1234"},
		{"ipmi_address", di["ipmi_address"], "10.20.3.4"},
		{"ipmi_username", di["ipmi_username"], "admin"},
		{"ipmi_password (masked)", di["ipmi_password"], "******"},
		{"cpus", props["cpus"], float64(16)},
		{"memory_mb", props["memory_mb"], float64(32768)},
		{"local_gb", props["local_gb"], float64(446)},
		{"traits", fmt.Sprint(n["traits"]), "[CUSTOM_DISCOVERED]"},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	_, _, b = k.call("GET", "/v1/ports?node="+id+"&detail=true", "")
	var ports struct {
		Ports []struct {
			Address    string `json:"address"`
			PXEEnabled bool   `json:"pxe_enabled"`
		} `json:"ports"`
	}
	if err := json.Unmarshal(b, &ports); err != nil || len(ports.Ports) != 1 || ports.Ports[0].Address != "52:54:00:d1:00:01" || !ports.Ports[0].PXEEnabled {
		t.Errorf("ports of the discovered node: %s (want the PXE interface only)", b)
	}
	if code, _, b := k.call("GET", "/v1/nodes/"+id+"/inventory", ""); code != http.StatusOK || !strings.Contains(string(b), `"auto_discovered":true`) || !strings.Contains(string(b), "PowerEdge R650") {
		t.Errorf("inventory: %d %s", code, b)
	}
	if _, _, b := k.call("GET", "/v1/nodes/"+id+"/history", ""); !strings.Contains(string(b), "enrolled by discovery with driver ipmi") || !strings.Contains(string(b), "lab-bmc") {
		t.Errorf("history does not say the node was discovered: %s", b)
	}

	// The same machine reporting again is the node now, not a new one.
	code, _, b = k.call("POST", "/v1/continue_inspection", discoveryInventory("Dell Inc.", "ABC1234", "10.20.3.4", "52:54:00:d1:00:01"))
	if code != http.StatusBadRequest || !strings.Contains(faultstring(t, b), "inspect wait") {
		t.Errorf("second report of the same machine: %d %s", code, b)
	}
	// A machine the rules refuse is not enrolled, and says why.
	code, _, b = k.call("POST", "/v1/continue_inspection", discoveryInventory("Contoso", "Z9", "10.20.3.5", "52:54:00:d1:00:09"))
	if code != http.StatusBadRequest || !strings.Contains(faultstring(t, b), "vendor Contoso is not racked here") {
		t.Errorf("refused machine: %d %s", code, b)
	}
	_, _, b = k.call("GET", "/v1/nodes", "")
	if got := strings.Count(string(b), `"uuid"`); got != 1 {
		t.Errorf("%d nodes after three reports, want 1: %s", got, b)
	}
	if strings.Contains(k.Logs(), "s3cret-from-rule") {
		t.Errorf("the password a rule set reached the log")
	}
}

// TestDiscoveryNeedsTheFlag: without --boot-unknown discovery an unknown
// machine's report is 404, and a bad rules file stops kiln serve at start
// with the file and rule named.
func TestDiscoveryNeedsTheFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := startKiln(t, filepath.Join(dir, "kiln.db"))
	if code, _, b := k.call("POST", "/v1/continue_inspection", discoveryInventory("Dell Inc.", "A", "10.20.3.4", "52:54:00:d1:00:05")); code != http.StatusNotFound {
		t.Errorf("unknown machine without discovery: %d %s", code, b)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("- uuid: x\n  actions: [{op: api-call, args: {url: 'http://example'}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outB, err := exec.Command(kilnBin, "serve", "--db", filepath.Join(dir, "other.db"), "--listen", kilnproc.FreeAddr(t), "--inspection-rules", bad).CombinedOutput()
	out := string(outB)
	if err == nil || !strings.Contains(out, "--inspection-rules") || !strings.Contains(out, "rule 1 (x)") || !strings.Contains(out, "api-call") {
		t.Errorf("bad rules file: err %v, output %s", err, out)
	}
}
