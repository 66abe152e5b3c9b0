// Package osclient_test drives a real `kiln serve` with the OpenStack
// client (`openstack baremetal …`, python3-openstackclient and
// python3-ironicclient), as an operator would, and checks what each
// command prints.
package osclient_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
)

var kilnBin string

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin) }

// osc runs `openstack baremetal …` against one controller.
type osc struct {
	t   *testing.T
	bin string
	url string
}

// newOSC finds the client (skipping, and saying why, when it is absent)
// and starts a controller for it.
func newOSC(t *testing.T) *osc {
	t.Helper()
	bin, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("openstack (python3-openstackclient) not installed")
	}
	if err := exec.Command(bin, "baremetal", "driver", "list", "--help").Run(); err != nil {
		t.Skipf("openstack has no baremetal commands (python3-ironicclient not installed): %v", err)
	}
	p := kilnproc.Start(t, kilnBin, t.TempDir()+"/kiln.db", "--conductor", "osc-conductor")
	return &osc{t: t, bin: bin, url: p.URL}
}

// run runs one sub-command and returns what it printed (stdout and
// stderr); it fails the test when the exit status is not the expected one.
func (o *osc) run(wantOK bool, args ...string) string {
	o.t.Helper()
	cmd := exec.Command(o.bin, append([]string{"baremetal"}, args...)...)
	// Only this endpoint: none of the caller's OS_* (a cloud, a pinned version).
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OS_") })
	cmd.Env = append(env, "OS_ENDPOINT="+o.url, "OS_AUTH_TYPE=none")
	out, err := cmd.CombinedOutput()
	if (err == nil) != wantOK {
		o.t.Fatalf("openstack baremetal %s: exit %v, want success %v\n%s", strings.Join(args, " "), err, wantOK, out)
	}
	return string(out)
}

// ok runs a sub-command that must succeed.
func (o *osc) ok(args ...string) string { o.t.Helper(); return o.run(true, args...) }

// fails runs a sub-command that must fail and print want.
func (o *osc) fails(want string, args ...string) {
	o.t.Helper()
	if out := o.run(false, args...); !strings.Contains(out, want) {
		o.t.Errorf("openstack baremetal %s printed %q, want %q", strings.Join(args, " "), out, want)
	}
}

// obj runs a sub-command with -f json and decodes the object it prints.
func (o *osc) obj(args ...string) map[string]any {
	o.t.Helper()
	out := o.ok(append(args, "-f", "json")...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		o.t.Fatalf("openstack baremetal %s: not a JSON object: %v\n%s", strings.Join(args, " "), err, out)
	}
	return m
}

// list runs a sub-command with -f json and decodes the rows it prints.
func (o *osc) list(args ...string) []map[string]any {
	o.t.Helper()
	out := o.ok(append(args, "-f", "json")...)
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		o.t.Fatalf("openstack baremetal %s: not a JSON list: %v\n%s", strings.Join(args, " "), err, out)
	}
	return rows
}

// column collects one column of list rows.
func column(rows []map[string]any, name string) []string {
	var out []string
	for _, r := range rows {
		s, _ := r[name].(string)
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
