package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/osctool"
)

// stepsOSC runs `openstack baremetal …` against k (in one Python
// interpreter for the test, see test/osctool) and returns run (the combined
// output; the exit status must be wantOK) and jsonOut (the command's
// -f json output, decoded). It skips the test where the client or its
// baremetal plugin is missing.
func stepsOSC(t *testing.T, k *kiln) (run func(wantOK bool, args ...string) string, jsonOut func(out any, args ...string)) {
	t.Helper()
	s := osctool.Start(t, k.URL)
	run = func(wantOK bool, args ...string) string {
		t.Helper()
		out, code, err := s.Run(append([]string{"baremetal"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if (code == 0) != wantOK {
			t.Fatalf("openstack baremetal %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
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
