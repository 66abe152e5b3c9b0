// Package osctool runs `openstack baremetal …` for tests against a kiln
// serve: python3-openstackclient's own entry point, each command's output
// and exit status checked by the caller. A Session keeps one Python
// interpreter per test (batch.py) because importing the client costs over a
// second of CPU per command, which made the client tests the slowest part
// of `make test`; the installed `openstack` script itself is run once per
// test binary, to prove it starts and has the baremetal plugin.
package osctool

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
)

//go:embed batch.py
var batchPy []byte

// Session is one Python interpreter running openstack commands against one
// endpoint, one at a time.
type Session struct {
	mu   sync.Mutex
	in   io.Writer
	out  *bufio.Reader
	cmd  *exec.Cmd
	errs *kilnproc.LogBuffer
}

var (
	checkOnce sync.Once
	python    string // the interpreter of the openstack script
	skipWhy   string // why the client cannot run, when it cannot
)

// check runs the installed `openstack` once: it must start and know the
// baremetal commands, and its #! line names the Python that has the client.
func check() {
	bin, err := exec.LookPath("openstack")
	if err != nil {
		skipWhy = "openstack (python3-openstackclient) not installed"
		return
	}
	if out, err := exec.Command(bin, "baremetal", "driver", "list", "--help").CombinedOutput(); err != nil {
		skipWhy = fmt.Sprintf("openstack has no baremetal commands (python3-ironicclient not installed): %v: %s", err, out)
		return
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		skipWhy = fmt.Sprintf("read %s: %v", bin, err)
		return
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if !strings.HasPrefix(first, "#!") {
		skipWhy = bin + " is not a Python script (no #! line)"
		return
	}
	fields := strings.Fields(strings.TrimPrefix(first, "#!"))
	if len(fields) == 0 {
		skipWhy = bin + " has an empty #! line"
		return
	}
	python = fields[0]
	if filepath.Base(python) == "env" && len(fields) > 1 {
		python = fields[1]
	}
}

// Missing says why the client cannot run here ("" when it can), for tests
// whose client half is optional.
func Missing() string {
	checkOnce.Do(check)
	return skipWhy
}

// Start begins a session against endpoint (OS_ENDPOINT, no auth); none of
// the caller's OS_* variables reach it. It skips the test, saying why, when
// the client is not installed. The interpreter ends with the test.
func Start(t testing.TB, endpoint string) *Session {
	t.Helper()
	if why := Missing(); why != "" {
		t.Skip(why)
	}
	script := filepath.Join(t.TempDir(), "batch.py")
	if err := os.WriteFile(script, batchPy, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, script)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OS_") })
	cmd.Env = append(env, "OS_ENDPOINT="+endpoint, "OS_AUTH_TYPE=none")
	errs := &kilnproc.LogBuffer{}
	cmd.Stderr = errs
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Session{in: in, out: bufio.NewReaderSize(out, 1<<20), cmd: cmd, errs: errs}
	t.Cleanup(func() {
		in.Close() // the script ends at the end of its input
		_ = cmd.Wait()
	})
	return s
}

// Run runs `openstack args…` and returns what it printed (stdout and
// stderr together, as a terminal shows them) and its exit status.
func (s *Session) Run(args ...string) (out string, code int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	line, err := json.Marshal(args)
	if err != nil {
		return "", 0, err
	}
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		return "", 0, fmt.Errorf("openstack %s: %w (interpreter: %s)", strings.Join(args, " "), err, s.errs.Logs())
	}
	answer, err := s.out.ReadBytes('\n')
	if err != nil {
		return "", 0, fmt.Errorf("openstack %s: no answer: %w (interpreter: %s)", strings.Join(args, " "), err, s.errs.Logs())
	}
	var a struct {
		Code int    `json:"code"`
		Out  string `json:"out"`
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		return "", 0, fmt.Errorf("openstack %s: bad answer %q: %w", strings.Join(args, " "), answer, err)
	}
	return a.Out, a.Code, nil
}
