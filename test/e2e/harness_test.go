//go:build e2e

// Package e2e provisions QEMU machines with a real `kiln serve`: the machine
// is a bmcsim QEMU backend (SeaBIOS or OVMF, iPXE over QEMU user
// networking), the controller drives it over Redfish, the agent is the real
// kiln-agent in the initramfs that `make initramfs` builds, and the images are
// built by mkimage.sh. Run with `make e2e` (build tag e2e).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/internal/syspath"
	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/kilnproc"
)

// Marker is what the deployed test OS prints (see deployedos).
const Marker = "KILN-E2E-DEPLOYED-OS"

var (
	repoRoot string
	kilnBin  string
	imageDir string // mkimage.sh output: good.*, broken.*
	summary  []string
	summMu   sync.Mutex
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	repoRoot = filepath.Join(wd, "..", "..")
	if why := missing(); why != "" {
		fmt.Println("e2e: SKIP:", why)
		return 0
	}
	bin, cleanup, err := kilnproc.Build()
	if err != nil {
		fmt.Println("e2e:", err)
		return 1
	}
	defer cleanup()
	kilnBin = bin
	dir, err := os.MkdirTemp("", "kiln-e2e-images")
	if err != nil {
		fmt.Println("e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	imageDir = dir
	start := time.Now()
	for _, id := range []string{"good", "broken"} {
		ctx, cancel := testtool.WithTimeout(context.Background(), "build", testtool.BuildTimeout)
		cmd := testtool.Command(ctx, filepath.Join(repoRoot, "test/e2e/mkimage.sh"), filepath.Join(repoRoot, "out/kernel"), dir, id)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			fmt.Println("e2e: build test image:", testtool.Why(ctx, err))
			return 1
		}
	}
	fmt.Printf("e2e: test images built in %.1fs\n", time.Since(start).Seconds())
	code := m.Run()
	summMu.Lock()
	for _, s := range summary {
		fmt.Println(s)
	}
	summMu.Unlock()
	return code
}

// missing names what the e2e cannot run without ("" when all is there).
func missing() string {
	syspath.ExtendPATH() // the harness runs sgdisk and mkfs.vfat by name
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "mcopy", "syslinux", "sgdisk", "objcopy", "zstd", "cpio", "mkfs.vfat"} {
		if _, err := syspath.LookPath(tool); err != nil {
			return tool + " not found (apt-get install qemu-system-x86 qemu-utils mtools syslinux gdisk binutils zstd cpio dosfstools)"
		}
	}
	for _, f := range []string{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/lib/ipxe/qemu/pxe-virtio.rom", "/usr/lib/ipxe/qemu/efi-virtio.rom",
		"/usr/lib/systemd/boot/efi/linuxx64.efi.stub", "/usr/lib/syslinux/mbr/gptmbr.bin"} {
		if _, err := os.Stat(f); err != nil {
			return f + " missing (apt-get install ovmf ipxe-qemu systemd-boot-efi syslinux-common)"
		}
	}
	for _, f := range []string{"out/kiln-agent.kernel", "out/kiln-agent.initramfs", "out/kernel/vmlinuz", "out/kernel/modules/order"} {
		if _, err := os.Stat(filepath.Join(repoRoot, f)); err != nil {
			return f + " missing: run `make initramfs` first (make e2e does)"
		}
	}
	return ""
}

func report(format string, args ...any) {
	summMu.Lock()
	defer summMu.Unlock()
	summary = append(summary, fmt.Sprintf(format, args...))
}

// imageServer serves imageDir on 127.0.0.1 (10.0.2.2 from the guests) and
// measures each GET; rate, when set, throttles it in bytes per second.
type imageServer struct {
	URL     string // as the guest sees it
	HostURL string // as the host (the BMC simulator) sees it
	srv     *http.Server
	rate    atomic.Int64
	sent    atomic.Int64

	mu   sync.Mutex
	gets []served
}

type served struct {
	path  string
	bytes int64
	dur   time.Duration
}

func newImageServer(t *testing.T) *imageServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveImages(t, ln, "http://10.0.2.2:"+portOf(ln.Addr().String()))
}

// serveImages is the image server on ln, which guests reach at guestURL.
func serveImages(t *testing.T, ln net.Listener, guestURL string) *imageServer {
	s := &imageServer{URL: guestURL, HostURL: "http://" + ln.Addr().String()}
	fs := http.FileServer(http.Dir(imageDir))
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		cw := &countWriter{ResponseWriter: w, s: s}
		fs.ServeHTTP(cw, r)
		s.mu.Lock()
		s.gets = append(s.gets, served{r.URL.Path, cw.n, time.Since(start)})
		s.mu.Unlock()
		t.Logf("image server: %s %s: %d bytes in %.1fs", r.Method, r.URL.Path, cw.n, time.Since(start).Seconds())
	})}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() {
		// Let handlers finish (they log through t) before the test ends.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(ctx)
		s.srv.Close()
	})
	return s
}

// last returns the most recent GET of path.
func (s *imageServer) last(path string) (served, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.gets) - 1; i >= 0; i-- {
		if s.gets[i].path == path {
			return s.gets[i], true
		}
	}
	return served{}, false
}

type countWriter struct {
	http.ResponseWriter
	s *imageServer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	if rate := c.s.rate.Load(); rate > 0 {
		// 64 KiB at a time at the configured rate.
		total := 0
		for len(b) > 0 {
			k := min(len(b), 64<<10)
			n, err := c.ResponseWriter.Write(b[:k])
			total += n
			c.n += int64(n)
			c.s.sent.Add(int64(n))
			if err != nil {
				return total, err
			}
			b = b[k:]
			time.Sleep(time.Duration(int64(k) * int64(time.Second) / rate))
		}
		return total, nil
	}
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	c.s.sent.Add(int64(n))
	return n, err
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// lab is one scenario's world: a controller, a BMC with one QEMU machine,
// the image server.
type lab struct {
	t       *testing.T
	name    string
	dir     string
	db      string
	addr    string // controller listen address (127.0.0.1:port)
	kiln    *kilnproc.Proc
	vm      *bmcsim.QEMU
	bmc     *bmcsim.BMC
	images  *imageServer
	mac     string
	agentFw string // host port forwarded to the agent's 9999
	node    string // UUID
	timings []string
	// secure (labOpts.secure): kiln serve's extra flags, and the client
	// and credentials the API is called with.
	secure *secureAPI
	// client, when set, calls the API (a controller in a network
	// namespace: dhcp_test.go).
	client *http.Client
}

type labOpts struct {
	uefi bool
	disk string // "qcow2" or "raw"
	// guestIP is the agent's address when it is not QEMU's first DHCP
	// address (a static-IP host): the port forward to the agent needs it.
	guestIP string
	// secure runs kiln serve with --htpasswd and a self-signed --tls-cert
	// (tls_test.go).
	secure bool
	// diskSize is each disk's size (default 4G); extraDisks adds that many
	// more virtio disks, dir/disk1.<disk>, … (raid_test.go).
	diskSize   string
	extraDisks int
}

func newLab(t *testing.T, name string, o labOpts) *lab {
	t.Helper()
	dir, err := os.MkdirTemp("", "ke2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "vm", "serial.log")); err == nil {
				t.Logf("serial log (last 6 KiB):\n%s", tail(string(b), 6144))
			}
		}
		os.RemoveAll(dir)
	})
	l := &lab{t: t, name: name, dir: dir, db: filepath.Join(dir, "kiln.db"), addr: freeAddr(t)}
	l.agentFw = portOf(freeAddr(t))
	if o.secure {
		l.secure = newSecureAPI(t, dir)
	}
	l.startKiln()
	l.images = newImageServer(t)

	if o.disk == "" {
		o.disk = "qcow2"
	}
	if o.diskSize == "" {
		o.diskSize = "4G"
	}
	disk := filepath.Join(dir, "disk."+o.disk)
	var extra []string
	for i := 0; i <= o.extraDisks; i++ {
		p := disk
		if i > 0 {
			p = filepath.Join(dir, fmt.Sprintf("disk%d.%s", i, o.disk))
			extra = append(extra, "-drive", fmt.Sprintf("file=%s,if=none,id=disk%ddrv,format=%s", p, i, o.disk),
				"-device", fmt.Sprintf("virtio-blk-pci,drive=disk%ddrv,id=disk%d", i, i))
		}
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", o.disk, p, o.diskSize).CombinedOutput(); err != nil {
			t.Fatalf("create disk: %v: %s", err, out)
		}
	}
	l.mac = newMAC("e2")
	cfg := bmcsim.QEMUConfig{
		Dir: filepath.Join(dir, "vm"), UEFI: o.uefi, MAC: l.mac, Disk: disk, ExtraArgs: extra,
		BootFile: "http://10.0.2.2:" + portOf(l.addr) + "/boot/boot.ipxe",
		HostFwd:  []string{"tcp:127.0.0.1:" + l.agentFw + "-" + o.guestIP + ":9999"},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if l.secure != nil {
		cfg.HTTPClient = l.secure.client
	}
	vm, err := bmcsim.NewQEMU(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := bmcsim.NewService(bmcsim.Config{Systems: []bmcsim.SystemConfig{{Backend: vm}}})
	if err != nil {
		t.Fatal(err)
	}
	bmc, err := bmcsim.Listen("127.0.0.1:0", svc)
	if err != nil {
		t.Fatal(err)
	}
	l.vm, l.bmc = vm, bmc
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = vm.Close(ctx)
		bmc.Close()
	})
	return l
}

func (l *lab) startKiln() {
	scheme, extra := "http", []string(nil)
	if l.secure != nil {
		scheme, extra = "https", l.secure.flags
	}
	l.kiln = kilnproc.StartAddr(l.t, kilnBin, l.db, l.addr, append([]string{
		"--api-url", scheme + "://10.0.2.2:" + portOf(l.addr),
		"--boot-dir", filepath.Join(repoRoot, "out"),
		// The BMC simulator runs on the host: it fetches controller-built
		// ISOs at the listen address, not at the guests' 10.0.2.2.
		"--media-url", scheme + "://" + l.addr,
		"--callback-timeout", "6m", "--power-sync-interval", "0", "--log-level", "debug"}, extra...)...)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// api calls the controller's /v1 API; out (if not nil) receives the JSON body.
func (l *lab) api(method, path string, body any, out any) int {
	l.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, l.kiln.URL+path, rd)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	req.Header.Set("Content-Type", "application/json")
	hc := http.DefaultClient
	if l.client != nil {
		hc = l.client
	}
	if l.secure != nil {
		hc = l.secure.client
		req.SetBasicAuth(l.secure.user, l.secure.password)
	}
	resp, err := hc.Do(req)
	if err != nil {
		l.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		l.t.Fatalf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			l.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

type node struct {
	UUID               string         `json:"uuid"`
	ProvisionState     string         `json:"provision_state"`
	TargetProvision    *string        `json:"target_provision_state"`
	PowerState         *string        `json:"power_state"`
	LastError          *string        `json:"last_error"`
	DriverInternalInfo map[string]any `json:"driver_internal_info"`
	DeployStep         map[string]any `json:"deploy_step"`
	CleanStep          map[string]any `json:"clean_step"`
	Properties         map[string]any `json:"properties"`
}

func (l *lab) get() node {
	var n node
	l.api("GET", "/v1/nodes/"+l.node, nil, &n)
	return n
}

// enroll creates the redfish node and its port.
func (l *lab) enroll(bootIface string, automatedClean bool) {
	l.enrollWith(bootIface, automatedClean, nil)
}

// guestKernelArgs go on every agent kernel's command line: under TCG on a
// busy host the kernel's check that the timer interrupt arrives can miss it
// and panic ("IO-APIC + timer doesn't work!"); no_timer_check skips that
// check, as the QEMU boot tests and scripts/vmtest.sh do.
const guestKernelArgs = "no_timer_check"

// enrollWith is enroll with extra driver_info keys.
func (l *lab) enrollWith(bootIface string, automatedClean bool, extraInfo map[string]any) {
	user, pass := l.bmc.Service.Credentials()
	info := map[string]any{
		"redfish_address": l.bmc.URL, "redfish_system_id": l.bmc.Service.SystemPath(l.bmc.Service.SystemIDs()[0]),
		"redfish_username": user, "redfish_password": pass,
		"kernel_append_params": guestKernelArgs + " ipa-advertise-host=127.0.0.1 ipa-advertise-port=" + l.agentFw,
	}
	for k, v := range extraInfo {
		info[k] = v
	}
	var n node
	l.api("POST", "/v1/nodes", map[string]any{
		"name": "e2e-" + l.name, "driver": "redfish",
		"boot_interface": bootIface, "deploy_interface": "direct", "inspect_interface": "agent",
		"automated_clean": automatedClean, "driver_info": info,
	}, &n)
	l.node = n.UUID
	l.api("POST", "/v1/ports", map[string]any{"node_uuid": l.node, "address": l.mac, "pxe_enabled": true}, nil)
	l.t.Logf("enrolled node %s (MAC %s, BMC %s)", l.node, l.mac, l.bmc.URL)
}

func (l *lab) provision(target string, extra map[string]any) {
	body := map[string]any{"target": target}
	for k, v := range extra {
		body[k] = v
	}
	l.api("PUT", "/v1/nodes/"+l.node+"/states/provision", body, nil)
}

// phase times one provisioning action.
type phase struct {
	start, powerOn, heartbeat time.Time
	ons                       int // power-ons before the request
}

// begin starts timing a phase; call it before the request.
func (l *lab) begin() *phase { return &phase{start: time.Now(), ons: l.vm.PowerOns()} }

// waitState polls until the node reaches want (a stable state); a failure
// state or the timeout fails the test. It records when the VM was powered on
// and when the agent's first heartbeat arrived.
func (l *lab) waitState(want string, timeout time.Duration, p *phase) node {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		n := l.get()
		if n.ProvisionState != last {
			l.t.Logf("[%s] %s → %s (power %v)", time.Now().Format("15:04:05.0"), last, n.ProvisionState, deref(n.PowerState))
			last = n.ProvisionState
		}
		if p != nil {
			if p.powerOn.IsZero() && l.vm.PowerOns() > p.ons {
				p.powerOn = time.Now()
			}
			if p.heartbeat.IsZero() && n.DriverInternalInfo["agent_url"] != nil && n.DriverInternalInfo["agent_url"] != "" {
				p.heartbeat = time.Now()
			}
		}
		// A failed state keeps its target (deploy failed → active), as in Ironic.
		if n.ProvisionState == want && (n.TargetProvision == nil || *n.TargetProvision == "" || strings.HasSuffix(want, "failed")) {
			return n
		}
		if strings.HasSuffix(n.ProvisionState, "failed") && !strings.HasSuffix(want, "failed") {
			l.t.Fatalf("node went to %s waiting for %s: %s", n.ProvisionState, want, deref(n.LastError))
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("node still %s after %v waiting for %s (last_error %s)", n.ProvisionState, timeout, want, deref(n.LastError))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// timing logs and remembers one measurement of the scenario.
func (l *lab) timing(what string, d time.Duration) {
	l.t.Logf("TIMING %s: %s %.1fs", l.name, what, d.Seconds())
	l.timings = append(l.timings, fmt.Sprintf("%s %.1fs", what, d.Seconds()))
}

func (l *lab) phaseTimings(what string, p *phase, end time.Time) {
	if !p.powerOn.IsZero() && !p.heartbeat.IsZero() {
		l.timing(what+": power on → first heartbeat", p.heartbeat.Sub(p.powerOn))
	}
	l.timing(what+": request → done", end.Sub(p.start))
}

func (l *lab) summary() {
	report("e2e summary %s: %s", l.name, strings.Join(l.timings, "; "))
}

// serialSince returns the serial console output of power-ons after the
// first `after` ones.
func (l *lab) serialSince(after int) string {
	b, _ := os.ReadFile(l.vm.SerialLog())
	parts := strings.Split(string(b), "[kiln-bmcsim] power-on ")
	if after+1 >= len(parts) {
		return ""
	}
	return strings.Join(parts[after+1:], "[kiln-bmcsim] power-on ")
}

// waitMarker waits for the deployed OS's marker line in the console output
// of power-ons after `after` and returns the line.
func (l *lab) waitMarker(after int, timeout time.Duration) string {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s := l.serialSince(after)
		if i := strings.Index(s, Marker); i >= 0 {
			line := s[i:]
			if j := strings.IndexAny(line, "\r\n"); j >= 0 {
				return line[:j]
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	l.t.Fatalf("no %s line on the console within %v", Marker, timeout)
	return ""
}

func sha256Of(t *testing.T, file string) string {
	b, err := os.ReadFile(filepath.Join(imageDir, file+".sha256"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func fileSize(t *testing.T, file string) int64 {
	fi, err := os.Stat(filepath.Join(imageDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
