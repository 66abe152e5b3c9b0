// Package agente2e runs Kiln's real controller (`kiln serve` on SQLite) and
// the real kiln-agent binary against each other: inspection, cleaning and
// deploys onto a loop device, as root. The node uses fake-hardware (power and
// boot touch nothing), so the test plays the machine: it starts the agent
// process when the node waits for it and stops it when the controller would
// have powered the machine off.
package agente2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/kilnhq/kiln/test/kilnproc"
)

var kilnBin, agentBin string

func TestMain(m *testing.M) {
	bin, cleanup, err := kilnproc.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kilnBin = bin
	agentBin = filepath.Join(filepath.Dir(bin), "kiln-agent")
	ctx, cancel := testtool.WithTimeout(context.Background(), "build", testtool.BuildTimeout)
	cmd := testtool.Command(ctx, "go", "build", "-o", agentBin, "github.com/kilnhq/kiln/agent/cmd/kiln-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	err = cmd.Run()
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build kiln-agent:", testtool.Why(ctx, err))
		cleanup()
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// needRoot skips when loop devices cannot be made here.
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for loop devices")
	}
	for _, tool := range append([]string{"losetup"}, tools...) {
		testtool.Need(t, tool)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// loopDevice attaches a sparse file of size bytes.
func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f, size); err != nil {
		t.Fatal(err)
	}
	dev := strings.TrimSpace(run(t, "losetup", "--find", "--show", "--partscan", f))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// randomMAC is a locally administered unicast MAC nobody else uses.
func randomMAC() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	b[0] = b[0]&0xfc | 0x02
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

// ---------------------------------------------------------------------------
// The controller.

type kiln struct {
	t   *testing.T
	p   *kilnproc.Proc
	URL string
}

func startKiln(t *testing.T) *kiln {
	t.Helper()
	p := kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"),
		"--power-sync-interval", "0", "--conductor", "e2e")
	return &kiln{t: t, p: p, URL: p.URL}
}

func (k *kiln) call(method, path string, body any) (int, map[string]any) {
	k.t.Helper()
	var buf bytes.Buffer
	if body != nil {
		_ = json.NewEncoder(&buf).Encode(body)
	}
	req, _ := http.NewRequest(method, k.URL+path, &buf)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (k *kiln) must(method, path string, body any, want int) map[string]any {
	k.t.Helper()
	code, out := k.call(method, path, body)
	if code != want {
		k.t.Fatalf("%s %s: %d %v (want %d)", method, path, code, out, want)
	}
	return out
}

// node enrolls a fake-hardware node with the direct deploy and agent
// inspection interfaces and a port with mac.
func (k *kiln) node(mac string, fields map[string]any) string {
	k.t.Helper()
	body := map[string]any{"driver": "fake-hardware", "deploy_interface": "direct", "inspect_interface": "agent",
		"name": "e2e-" + strings.ReplaceAll(mac, ":", "")}
	for key, v := range fields {
		body[key] = v
	}
	n := k.must("POST", "/v1/nodes", body, 201)
	uuid := n["uuid"].(string)
	k.must("POST", "/v1/ports", map[string]any{"node_uuid": uuid, "address": mac}, 201)
	return uuid
}

// provision asks for a provision state change, retrying while the node is locked.
func (k *kiln) provision(uuid string, body map[string]any) {
	k.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out := k.call("PUT", "/v1/nodes/"+uuid+"/states/provision", body)
		if code == 202 {
			return
		}
		if code != 409 || time.Now().After(deadline) {
			k.t.Fatalf("provision %s %v: %d %v", uuid, body, code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wait polls the node until its provision state is one of states and it is
// not reserved; a failed state not asked for ends the test at once.
func (k *kiln) wait(uuid string, timeout time.Duration, states ...string) map[string]any {
	k.t.Helper()
	deadline := time.Now().Add(timeout)
	var n map[string]any
	for time.Now().Before(deadline) {
		n = k.must("GET", "/v1/nodes/"+uuid, nil, 200)
		st, _ := n["provision_state"].(string)
		for _, s := range states {
			if st == s && n["reservation"] == nil {
				return n
			}
		}
		if strings.HasSuffix(st, "failed") || st == "error" {
			k.t.Fatalf("node %s is %s (waiting for %v): last_error %v", uuid, st, states, n["last_error"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	k.t.Fatalf("node %s is %v after %s, not %v (last_error %v)", uuid, n["provision_state"], timeout, states, n["last_error"])
	return nil
}

// ---------------------------------------------------------------------------
// The agent process.

type agentProc struct {
	t   *testing.T
	cmd *exec.Cmd
	kilnproc.LogBuffer
	done chan struct{}
}

// startAgent runs kiln-agent as the machine with BOOTIF mac would, allowed to
// write only dev, its command API on a free loopback port.
func startAgent(t *testing.T, k *kiln, mac, dev string, extra ...string) *agentProc {
	t.Helper()
	port := strings.TrimPrefix(kilnproc.FreeAddr(t), "127.0.0.1:")
	args := []string{"--cmdline=-", "--api-url", k.URL, "--bootif", mac, "--ramdisk", "false",
		"--listen-host", "127.0.0.1", "--listen-port", port, "--advertise-host", "127.0.0.1",
		"--lookup-timeout", "2m", "--plugin-dir", t.TempDir()}
	if dev != "" {
		args = append(args, "--allow-device", dev)
	}
	args = append(args, extra...)
	a := &agentProc{t: t, cmd: exec.Command(agentBin, args...), done: make(chan struct{})}
	a.cmd.Stdout, a.cmd.Stderr = a, a
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = a.cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("kiln-agent (port %s) logs:\n%s", port, tail(a.Logs(), 12000))
		}
	})
	return a
}

// Stop ends the agent as a powered-off machine would (SIGTERM outside a
// ramdisk just stops it; SIGKILL if it lingers).
func (a *agentProc) Stop() {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ---------------------------------------------------------------------------
// Images.

// diskImage builds a 24 MiB whole-disk image: a GPT with a 4 MiB ESP and an
// ext4 root partition holding /etc/os-release.
func diskImage(t *testing.T) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "image.raw")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 24<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "sgdisk", "-n1:2048:+4M", "-t1:EF00", "-n2:0:0", "-t2:8300", "-c2:root", img)
	root := filepath.Join(t.TempDir(), "root")
	_ = os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	_ = os.WriteFile(filepath.Join(root, "etc", "os-release"), []byte("ID=kilne2e\n"), 0o644)
	run(t, "mkfs.ext4", "-q", "-F", "-d", root, "-E", "offset="+strconv.Itoa(10240*512), img, "16M")
	return img
}

func sha256Of(t *testing.T, path string, off, n int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, off, n)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
