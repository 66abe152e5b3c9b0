// Package kilnproc runs real `kiln serve` processes for tests: build the
// binary once, start controllers on free ports, stop them with SIGTERM or kill
// them with SIGKILL the way a crash would.
package kilnproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/internal/testtool"
)

// Build compiles kiln into a temporary directory; call the returned cleanup
// when done (typically from TestMain). When $KILN_TEST_KILN names a binary,
// that one is used and left in place: make test builds kiln once for every
// package, where each package linking its own cost ~5 s of CPU.
func Build() (bin string, cleanup func(), err error) {
	if bin := os.Getenv("KILN_TEST_KILN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", nil, fmt.Errorf("KILN_TEST_KILN: %w", err)
		}
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "kiln-bin")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "kiln")
	ctx, cancel := testtool.WithTimeout(context.Background(), "build", testtool.BuildTimeout)
	defer cancel()
	cmd := testtool.Command(ctx, "go", "build", "-o", bin, "github.com/kilnhq/kiln/controller/cmd/kiln")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build kiln: %w", testtool.Why(ctx, err))
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// FreeAddr returns a loopback address with a port nobody listens on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Proc is one running controller.
type Proc struct {
	t   testing.TB
	cmd *exec.Cmd
	URL string
	LogBuffer
	done chan struct{}
}

// LogBuffer collects a process's output (it is the process's stdout and
// stderr) for a test to read while the process runs.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

// Logs returns what the process printed so far.
func (l *LogBuffer) Logs() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Start runs `kiln serve --listen <free port> --db db <extra…>` and waits
// until GET /v1/ answers. The port is free when chosen, but another
// process on the machine may take it before kiln binds it: kiln then
// exits at once, and Start tries another port (at most startAttempts).
func Start(t testing.TB, bin, db string, extra ...string) *Proc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		p, taken := start(t, nil, http.DefaultClient, bin, db, addr, attempt < startAttempts, extra...)
		if !taken {
			return p
		}
		t.Logf("kiln could not bind %s, taken meanwhile by another process; trying another port", addr)
	}
}

// freeAddr is FreeAddr; tests of Start replace it.
var freeAddr = FreeAddr

// startAttempts bounds Start's ports: a port taken between FreeAddr and
// kiln's bind is rare, several in a row would mean something else.
const startAttempts = 5

// StartAddr is Start on a given address: a controller restarted after a
// crash keeps the URL its agents were booted with.
func StartAddr(t testing.TB, bin, db, addr string, extra ...string) *Proc {
	t.Helper()
	p, _ := start(t, nil, http.DefaultClient, bin, db, addr, false, extra...)
	return p
}

// StartIn is StartAddr in the named network namespace (ip netns exec);
// client must reach addr there (see netnstest.DialContext).
func StartIn(t testing.TB, netns string, client *http.Client, bin, db, addr string, extra ...string) *Proc {
	t.Helper()
	p, _ := start(t, []string{"ip", "netns", "exec", netns}, client, bin, db, addr, false, extra...)
	return p
}

// start runs kiln on addr and waits until it answers. When kiln exits at
// start because addr is in use and mayRetry, start returns nil and true
// (taken) instead of failing the test.
func start(t testing.TB, wrap []string, ready *http.Client, bin, db, addr string, mayRetry bool, extra ...string) (*Proc, bool) {
	t.Helper()
	p := &Proc{t: t, URL: "http://" + addr, done: make(chan struct{})}
	if slices.Contains(extra, "--tls-cert") {
		// Readiness only: the tests check certificates themselves.
		p.URL = "https://" + addr
		ready = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	args := append(append(wrap, bin, "serve", "--listen", addr, "--db", db), extra...)
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("kiln %s logs (last 8 KiB):\n%s", addr, tail(p.Logs(), 8192))
		}
	})
	deadline := time.Now().Add(2 * time.Minute) // a safety net for a loaded machine
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			if mayRetry && strings.Contains(p.Logs(), "address already in use") {
				return nil, true
			}
			t.Fatalf("kiln exited at start:\n%s", p.Logs())
		default:
		}
		// Each poll is bounded, and ends when kiln does: on a port another
		// process took, the request may be accepted and never answered.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		go func() {
			select {
			case <-p.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/v1/", nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		resp, err := ready.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == 200 {
			return p, false
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("kiln did not start:\n%s", p.Logs())
	return nil, false
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Stop sends SIGTERM and waits for a clean exit.
func (p *Proc) Stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
		if !p.cmd.ProcessState.Success() {
			p.t.Fatalf("kiln exited with %v after SIGTERM:\n%s", p.cmd.ProcessState, p.Logs())
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		p.t.Fatalf("kiln did not stop on SIGTERM:\n%s", p.Logs())
	}
}

// Kill ends the process with SIGKILL, as a crash or an OOM kill would.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Pid is the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// RunTests is a TestMain body: it builds kiln into *bin, runs the tests,
// then the cleanups, and exits with the tests' status.
func RunTests(m *testing.M, bin *string, cleanups ...func()) {
	b, remove, err := Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = b
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	remove()
	os.Exit(code)
}

// CallJSON sends body (when not nil) as JSON at microversion 1.95 and
// decodes the answer's JSON object, as the tests that drive a controller
// by raw HTTP need; a transport error is returned, not fatal.
func CallJSON(c *http.Client, base, method, path string, body any) (int, map[string]any, error) {
	var buf bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&buf).Encode(body); err != nil {
			return 0, nil, err
		}
	}
	req, err := http.NewRequest(method, base+path, &buf)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}
