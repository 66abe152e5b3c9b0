// Package ironicinterop drives the real kiln-agent with an unmodified
// OpenStack Ironic (Debian's ironic-api and ironic-conductor, 2023.1 on
// bookworm): the test starts Ironic itself (noauth, SQLite, json-rpc, its
// own config directory, no system services), enrolls manual-management nodes
// (fake power, no-op management, PXE boot whose files go nowhere) and plays
// the machine: it runs kiln-agent, allowed to write only a loop device, when
// Ironic waits for the ramdisk and stops it when Ironic is done with it.
//
// Install the packages with:
//
//	apt-get install --no-install-recommends ironic-api ironic-conductor python3-ironicclient
package ironicinterop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

// microversion is what the test speaks; Ironic 2023.1 serves up to 1.82.
const microversion = "1.78"

var (
	agentBin   string
	skipReason string // set when Ironic cannot run here
)

func TestMain(m *testing.M) {
	for _, tool := range []string{"ironic-api", "ironic-conductor", "ironic-dbsync"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipReason = tool + " is not installed (apt-get install ironic-api ironic-conductor)"
		}
	}
	if skipReason == "" && os.Geteuid() != 0 {
		skipReason = "needs root for loop devices"
	}
	dir, err := os.MkdirTemp("", "ironicinterop-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if skipReason == "" {
		agentBin = filepath.Join(dir, "kiln-agent")
		ctx, cancel := testtool.WithTimeout(context.Background(), "build", testtool.BuildTimeout)
		cmd := testtool.Command(ctx, "go", "build", "-o", agentBin, "github.com/kilnhq/kiln/agent/cmd/kiln-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "build kiln-agent:", testtool.Why(ctx, err))
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ironic is one ironic-api + ironic-conductor pair.
type ironic struct {
	t    *testing.T
	URL  string
	dir  string
	http *http.Client
}

// ironicConf is the whole configuration: no keystone, no message bus, no
// DHCP, nothing outside dir.
const ironicConf = `[DEFAULT]
auth_strategy = noauth
rpc_transport = json-rpc
host = 127.0.0.1
debug = true
log_file = {{dir}}/ironic.log
use_stderr = false
enabled_hardware_types = manual-management
enabled_boot_interfaces = pxe
enabled_deploy_interfaces = direct
enabled_power_interfaces = fake
enabled_management_interfaces = noop
enabled_inspect_interfaces = no-inspect
enabled_network_interfaces = noop
enabled_console_interfaces = no-console
enabled_raid_interfaces = no-raid
enabled_rescue_interfaces = no-rescue
enabled_vendor_interfaces = no-vendor
enabled_bios_interfaces = no-bios
state_path = {{dir}}/state
tempdir = {{dir}}/tmp
[api]
host_ip = 127.0.0.1
port = {{api_port}}
api_workers = 1
[database]
connection = sqlite:///{{dir}}/ironic.db
[json_rpc]
auth_strategy = noauth
host_ip = 127.0.0.1
port = {{rpc_port}}
[conductor]
automated_clean = true
heartbeat_interval = 2
sync_power_state_interval = -1
[agent]
post_deploy_get_power_state_retries = 1
post_deploy_get_power_state_retry_interval = 1
[deploy]
http_url = http://127.0.0.1:1/
http_root = {{dir}}/http
fast_track = false
[dhcp]
dhcp_provider = none
[pxe]
tftp_root = {{dir}}/tftp
tftp_master_path = {{dir}}/tftp_master
images_path = {{dir}}/images
instance_master_path = {{dir}}/master_images
tftp_server = 127.0.0.1
[service_catalog]
endpoint_override = {{api_url}}
[oslo_concurrency]
lock_path = {{dir}}/lock
`

// startIronic writes the configuration, creates the schema and starts both
// services, each in its own process group so that everything they fork ends
// with them.
func startIronic(t *testing.T) *ironic {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"state", "tmp", "http", "tftp", "tftp_master", "images", "master_images", "lock"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	apiPort, rpcPort := freePort(t), freePort(t)
	url := "http://127.0.0.1:" + strconv.Itoa(apiPort)
	conf := strings.NewReplacer("{{dir}}", dir, "{{api_port}}", strconv.Itoa(apiPort),
		"{{rpc_port}}", strconv.Itoa(rpcPort), "{{api_url}}", url).Replace(ironicConf)
	confFile := filepath.Join(dir, "ironic.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ironic-dbsync", "--config-file", confFile, "create_schema").CombinedOutput(); err != nil {
		t.Fatalf("ironic-dbsync create_schema: %v\n%s", err, out)
	}
	ir := &ironic{t: t, URL: url, dir: dir, http: &http.Client{Timeout: 60 * time.Second}}
	for _, svc := range []string{"ironic-conductor", "ironic-api"} {
		cmd := exec.Command(svc, "--config-file", confFile)
		out, err := os.Create(filepath.Join(dir, svc+".out"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", svc, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); out.Close(); close(done) }()
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "ironic.log"))
			var errs []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, " ERROR ") || strings.Contains(l, " WARNING ") {
					errs = append(errs, l)
				}
			}
			t.Logf("Ironic's errors and warnings:\n%s", tail(strings.Join(errs, "\n"), 20000))
		}
	})
	// Up when the conductor has registered its hardware type.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		code, body := ir.call("GET", "/v1/drivers", nil)
		if code == 200 && bytes.Contains(body, []byte(`"manual-management"`)) {
			return ir
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "ironic.log"))
			t.Fatalf("Ironic not up after 3 minutes (GET /v1/drivers: %d %s)\n%s", code, body, tail(string(b), 8000))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// with is ir reporting failures to t (a subtest).
func (ir *ironic) with(t *testing.T) *ironic {
	c := *ir
	c.t = t
	return &c
}

func (ir *ironic) call(method, path string, body any) (int, []byte) {
	ir.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, ir.URL+path, rd)
	req.Header.Set("X-OpenStack-Ironic-API-Version", microversion)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ir.http.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (ir *ironic) must(method, path string, body any, want int) map[string]any {
	ir.t.Helper()
	code, b := ir.call(method, path, body)
	if code != want {
		ir.t.Fatalf("%s %s: %d %s (want %d)", method, path, code, b, want)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// provision asks for a provision state change, retrying while Ironic has
// the node locked.
func (ir *ironic) provision(uuid string, body map[string]any) {
	ir.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, b := ir.call("PUT", "/v1/nodes/"+uuid+"/states/provision", body)
		if code == 202 {
			return
		}
		if code != 409 || time.Now().After(deadline) {
			ir.t.Fatalf("provision %s %v: %d %s", uuid, body, code, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// errFailed is what waitState returns when the node failed instead.
type failedState struct{ state, lastError string }

// waitState polls the node until its provision state is want and it is not
// reserved. A failed state ends the wait with that state's last_error.
func (ir *ironic) waitState(uuid, want string, timeout time.Duration) (map[string]any, *failedState) {
	ir.t.Helper()
	deadline := time.Now().Add(timeout)
	var n map[string]any
	for time.Now().Before(deadline) {
		n = ir.must("GET", "/v1/nodes/"+uuid, nil, 200)
		st, _ := n["provision_state"].(string)
		if st == want && n["reservation"] == nil {
			return n, nil
		}
		if strings.HasSuffix(st, "failed") || st == "error" {
			le, _ := n["last_error"].(string)
			return n, &failedState{st, le}
		}
		time.Sleep(500 * time.Millisecond)
	}
	ir.t.Fatalf("node %s is %v after %s, not %s (last_error %v)", uuid, n["provision_state"], timeout, want, n["last_error"])
	return nil, nil
}

// mustState is waitState that fails the test on a failed state.
func (ir *ironic) mustState(uuid, want string, timeout time.Duration) map[string]any {
	ir.t.Helper()
	n, f := ir.waitState(uuid, want, timeout)
	if f != nil {
		ir.t.Fatalf("node %s went to %s waiting for %s: %s", uuid, f.state, want, f.lastError)
	}
	return n
}

// ---------------------------------------------------------------------------
// The machine: a loop device and the kiln-agent process.

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

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
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

type agentProc struct {
	cmd *exec.Cmd
	kilnproc.LogBuffer
	done chan struct{}
}

// startAgent boots "the ramdisk": kiln-agent pointed at Ironic, looking up
// with mac, allowed to write only dev. With firmware set, the agent runs in
// its own mount namespace where that directory is /sys/firmware, so that a
// UEFI machine's variables land in firmware/efi/efivars for the test to read.
func startAgent(t *testing.T, ir *ironic, mac, dev string, firmware ...string) *agentProc {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	a := &agentProc{done: make(chan struct{})}
	args := []string{"--cmdline=-", "--api-url", ir.URL, "--bootif", mac, "--ramdisk", "false",
		"--listen-host", "127.0.0.1", "--listen-port", port, "--advertise-host", "127.0.0.1",
		"--lookup-timeout", "3m", "--plugin-dir", t.TempDir(), "--allow-device", dev}
	if len(firmware) == 0 {
		a.cmd = exec.Command(agentBin, args...)
	} else {
		// unshare's new mount namespace is private: the bind mount is seen
		// by the agent only.
		script := `mount --bind "$0" /sys/firmware && exec "$@"`
		a.cmd = exec.Command("unshare", append([]string{"--mount", "sh", "-c", script, firmware[0], agentBin}, args...)...)
	}
	a.cmd.Stdout, a.cmd.Stderr = a, a
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("kiln-agent logs:\n%s", tail(a.Logs(), 12000))
		}
	})
	return a
}

// Stop ends the agent as the machine powering off would.
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
