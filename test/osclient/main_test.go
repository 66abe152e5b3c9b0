// Package osclient_test drives a real `kiln serve` with the OpenStack
// client (`openstack baremetal …`, python3-openstackclient and
// python3-ironicclient), as an operator would, and checks what each
// command prints.
package osclient_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/osctool"
)

var kilnBin string

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin) }

// osc runs `openstack baremetal …` against one controller, in one Python
// interpreter per test (see test/osctool).
type osc struct {
	t *testing.T
	s *osctool.Session
}

// newOSC finds the client (skipping, and saying why, when it is absent)
// and starts a controller for it.
func newOSC(t *testing.T) *osc {
	t.Helper()
	p := kilnproc.Start(t, kilnBin, t.TempDir()+"/kiln.db", "--conductor", "osc-conductor")
	return &osc{t: t, s: osctool.Start(t, p.URL)}
}

// run runs one sub-command and returns what it printed (stdout and
// stderr); it fails the test when the exit status is not the expected one.
func (o *osc) run(wantOK bool, args ...string) string {
	o.t.Helper()
	out, code, err := o.s.Run(append([]string{"baremetal"}, args...)...)
	if err != nil {
		o.t.Fatal(err)
	}
	if (code == 0) != wantOK {
		o.t.Fatalf("openstack baremetal %s: exit %d, want success %v\n%s", strings.Join(args, " "), code, wantOK, out)
	}
	return out
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
