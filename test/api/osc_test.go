package api_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// stepsOSC runs `openstack baremetal …` against k and returns run (the
// combined output; the exit status must be wantOK) and jsonOut (the
// command's -f json output, decoded). It skips the test where the client
// or its baremetal plugin is missing.
func stepsOSC(t *testing.T, k *kiln) (run func(wantOK bool, args ...string) string, jsonOut func(out any, args ...string)) {
	t.Helper()
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("openstack (python3-openstackclient) not installed")
	}
	if err := exec.Command(osc, "baremetal", "chassis", "list", "--help").Run(); err != nil {
		t.Skipf("openstack has no baremetal commands (python3-ironicclient not installed): %v", err)
	}
	run = func(wantOK bool, args ...string) string {
		t.Helper()
		cmd := exec.Command(osc, append([]string{"baremetal"}, args...)...)
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OS_") })
		cmd.Env = append(env, "OS_ENDPOINT="+k.URL, "OS_AUTH_TYPE=none")
		out, err := cmd.CombinedOutput()
		if (err == nil) != wantOK {
			t.Fatalf("openstack baremetal %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	jsonOut = func(out any, args ...string) {
		t.Helper()
		b := run(true, append(args, "-f", "json")...)
		if err := json.Unmarshal([]byte(b), out); err != nil {
			t.Fatalf("%v: not JSON: %s", args, b)
		}
	}
	return run, jsonOut
}
