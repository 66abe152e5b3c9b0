package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/osctool"
)

// hwNode enrolls a redfish node for BMC b (ramdisk deploy: no agent, so
// out-of-band clean steps run without booting one) and makes it
// manageable.
func (k *kiln) hwNode(t *testing.T, name string, b *bmcsim.BMC) {
	t.Helper()
	u, p := b.Credentials()
	body := fmt.Sprintf(`{"name":%q,"driver":"redfish","deploy_interface":"ramdisk","boot_interface":"fake",
		"driver_info":{"redfish_address":%q,"redfish_username":%q,"redfish_password":%q}}`, name, b.URL, u, p)
	if code, _, out := k.call("POST", "/v1/nodes", body); code != http.StatusCreated {
		t.Fatalf("create %s: %d %s", name, code, out)
	}
	k.provision(t, name, `{"target":"manage"}`)
	k.waitState(t, name, "manageable")
}

func (k *kiln) provision(t *testing.T, name, body string) {
	t.Helper()
	if code, _, out := k.call("PUT", "/v1/nodes/"+name+"/states/provision", body); code != http.StatusAccepted {
		t.Fatalf("provision %s %s: %d %s", name, body, code, out)
	}
}

// waitState polls until the node is in want with no reservation and no
// target (a failed state keeps its target, as in Ironic), and returns it;
// the deadline is a safety net only.
func (k *kiln) waitState(t *testing.T, name, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, _, b := k.call("GET", "/v1/nodes/"+name, "")
		n := mustJSON(t, b)
		settled := n["target_provision_state"] == nil || strings.HasSuffix(want, " failed")
		if n["provision_state"] == want && settled && n["reservation"] == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s never reached %s: state %v target %v last_error %v", name, want, n["provision_state"], n["target_provision_state"], n["last_error"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// biosValue reads one setting's value through the API.
func (k *kiln) biosValue(t *testing.T, node, name string) any {
	t.Helper()
	code, _, b := k.call("GET", "/v1/nodes/"+node+"/bios/"+name, "")
	if code != http.StatusOK {
		t.Fatalf("GET bios/%s of %s: %d %s", name, node, code, b)
	}
	return mustJSON(t, b)[name].(map[string]any)["value"]
}

const applyVirtualization = `{"target":"clean","clean_steps":[{"interface":"bios","step":"apply_configuration",
	"args":{"settings":[{"name":"ProcVirtualization","value":"Disabled"},{"name":"AcPwrRcvryUserDelay","value":120}]}}]}`

// TestBIOSCleanStepsOverHTTP runs bios.apply_configuration and
// bios.factory_reset as manual clean steps through a real kiln serve
// against the simulator, one node per personality; reads the settings
// back with gophercloud (detail at 1.74); and fails the step, naming the
// setting, when the firmware drops one.
func TestBIOSCleanStepsOverHTTP(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	labs := map[string]*bmcsim.Lab{}
	for _, p := range bmcsim.PersonalityNames() {
		lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: p})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lab.Close() })
		labs[p] = lab
		k.hwNode(t, "bios-"+p, lab.BMCs[0])
	}
	for p, lab := range labs {
		name := "bios-" + p
		before := lab.Requests()[0]
		start := time.Now()
		k.provision(t, name, applyVirtualization)
		n := k.waitState(t, name, "manageable")
		t.Logf("personality %s: manual clean bios.apply_configuration took %s and %d BMC requests (with power-off and settings cache)",
			p, time.Since(start).Round(time.Millisecond), lab.Requests()[0]-before)
		if n["last_error"] != nil || n["power_state"] != "power off" {
			t.Errorf("%s after clean: last_error %v power %v", name, n["last_error"], n["power_state"])
		}
		if v := k.biosValue(t, name, "ProcVirtualization"); v != "Disabled" {
			t.Errorf("%s ProcVirtualization %v after apply", name, v)
		}
		if v := k.biosValue(t, name, "AcPwrRcvryUserDelay"); v != "120" {
			t.Errorf("%s AcPwrRcvryUserDelay %v after apply", name, v)
		}
	}

	// gophercloud's list with registry details (1.74).
	c := newClient(t, k, "1.95")
	settings, err := nodes.ListBIOSSettings(context.Background(), c, "bios-generic", nodes.ListBIOSSettingsOpts{Detail: true}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(settings, func(s nodes.BIOSSetting) bool { return s.Name == "ProcVirtualization" })
	if i < 0 || settings[i].Value != "Disabled" || settings[i].AttributeType != "Enumeration" ||
		!slices.Equal(settings[i].AllowableValues, []string{"Enabled", "Disabled"}) || settings[i].ResetRequired == nil || !*settings[i].ResetRequired {
		t.Errorf("gophercloud ProcVirtualization: %+v", settings)
	}

	// Factory reset brings the defaults back.
	k.provision(t, "bios-idrac", `{"target":"clean","clean_steps":[{"interface":"bios","step":"factory_reset"}]}`)
	k.waitState(t, "bios-idrac", "manageable")
	if v := k.biosValue(t, "bios-idrac", "ProcVirtualization"); v != "Enabled" {
		t.Errorf("ProcVirtualization %v after factory reset", v)
	}

	// A setting the firmware drops fails the step, named; the node ends
	// in clean failed as in Ironic, and the cache shows what stuck.
	if err := labs["supermicro"].SetFaults(bmcsim.Faults{UnstickySettings: []string{"SriovGlobalEnable"}}); err != nil {
		t.Fatal(err)
	}
	k.provision(t, "bios-supermicro", `{"target":"clean","clean_steps":[{"interface":"bios","step":"apply_configuration",
		"args":{"settings":[{"name":"SriovGlobalEnable","value":"Enabled"}]}}]}`)
	n := k.waitState(t, "bios-supermicro", "clean failed")
	if msg, _ := n["last_error"].(string); !strings.Contains(msg, "step bios.apply_configuration failed") || !strings.Contains(msg, "SriovGlobalEnable") {
		t.Errorf("last_error %q", msg)
	}
	if v := k.biosValue(t, "bios-supermicro", "SriovGlobalEnable"); v != "Disabled" {
		t.Errorf("SriovGlobalEnable %v after a failed apply", v)
	}

	// Bad arguments fail the step without touching the BMC.
	before := labs["ilo"].Requests()[0]
	k.provision(t, "bios-ilo", `{"target":"clean","clean_steps":[{"interface":"bios","step":"apply_configuration","args":{}}]}`)
	n = k.waitState(t, "bios-ilo", "clean failed")
	if msg, _ := n["last_error"].(string); !strings.Contains(msg, `argument "settings" must be a non-empty list`) {
		t.Errorf("last_error %q", msg)
	}
	if after := labs["ilo"].Requests()[0]; after != before {
		t.Errorf("a step with bad arguments sent %d BMC requests", after-before)
	}
}

// TestBIOSOpenstackClient: `openstack baremetal node bios setting
// list/show` against a real kiln serve, fake-hardware, after a manual
// clean that changed a setting.
func TestBIOSOpenstackClient(t *testing.T) {
	t.Parallel()
	if why := osctool.Missing(); why != "" {
		t.Skip(why)
	}
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	if code, _, b := k.call("POST", "/v1/nodes", `{"name":"fake1","driver":"fake-hardware"}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	k.provision(t, "fake1", `{"target":"manage"}`)
	k.waitState(t, "fake1", "manageable")
	k.provision(t, "fake1", `{"target":"clean","clean_steps":[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"SriovGlobalEnable","value":"Enabled"}]}}]}`)
	k.waitState(t, "fake1", "manageable")

	osc := osctool.Start(t, k.URL)
	run := func(args ...string) string {
		t.Helper()
		out, code, err := osc.Run(append([]string{"baremetal", "--os-baremetal-api-version", "1.74"}, args...)...)
		if err != nil || code != 0 {
			t.Fatalf("openstack baremetal %s: exit %d %v\n%s", strings.Join(args, " "), code, err, out)
		}
		return out
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(run("node", "bios", "setting", "list", "fake1", "-f", "json")), &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, s := range list {
		got[fmt.Sprint(s["BIOS setting name"])] = s["BIOS setting value"]
	}
	if got["SriovGlobalEnable"] != "Enabled" || got["BootMode"] != "Uefi" || got["SecureBootAllowed"] != "True" || len(got) != 5 {
		t.Errorf("bios setting list: %v", list)
	}
	var show map[string]any
	if err := json.Unmarshal([]byte(run("node", "bios", "setting", "show", "fake1", "BootMode", "-f", "json")), &show); err != nil {
		t.Fatal(err)
	}
	if show["name"] != "BootMode" || show["value"] != "Uefi" || show["attribute_type"] != "Enumeration" || fmt.Sprint(show["allowable_values"]) != "[Uefi Bios]" {
		t.Errorf("bios setting show: %v", show)
	}
}
