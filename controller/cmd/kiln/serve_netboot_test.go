package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/pin/tftp/v3"

	"github.com/kilnhq/kiln/test/netnstest"
)

// nsProc is a kiln serve running inside a network namespace.
type nsProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan error
}

func (p *nsProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Write(b)
}

func (p *nsProc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func startInNS(t *testing.T, ns string, args ...string) *nsProc {
	t.Helper()
	p := &nsProc{done: make(chan error, 1)}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", ns, kilnBin, "serve"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *nsProc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("kiln serve ignored SIGTERM; logs:\n%s", p.Logs())
	}
}

// waitLog waits until the logs contain all of want, or the process ends.
func (p *nsProc) waitLog(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		logs := p.Logs()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(logs, w)
		}
		if ok {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("kiln serve exited (%v) before logging %q:\n%s", err, want, p.Logs())
		case <-deadline:
			t.Fatalf("kiln serve did not log %q:\n%s", want, p.Logs())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func dhcpClient(t *testing.T, seg netnstest.Segment, mac net.HardwareAddr) *nclient4.Client {
	t.Helper()
	var c *nclient4.Client
	var err error
	netnstest.In(t, seg.CliNS, func() {
		c, err = nclient4.New(seg.CliIf, nclient4.WithHWAddr(mac), nclient4.WithTimeout(10*time.Second))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func pxeMods(arch iana.Arch, ipxe bool) []dhcpv4.Modifier {
	m := []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(fmt.Sprintf("PXEClient:Arch:%05d:UNDI:002001", arch))),
		dhcpv4.WithOption(dhcpv4.OptClientArch(arch)),
	}
	if ipxe {
		m = append(m, dhcpv4.WithUserClass("iPXE", false))
	}
	return m
}

// TestServeNetboot runs kiln serve --dhcp full in a namespace and boots
// like firmware would from the other side of a veth: DHCP, then TFTP of
// the iPXE binary, then iPXE's DHCP and its script over HTTP.
func TestServeNetboot(t *testing.T) {
	seg := netnstest.New(t, "10.77.0.1/24")
	ipxeDir := t.TempDir()
	binary := bytes.Repeat([]byte("undionly"), 9000) // 72000 bytes
	if err := os.WriteFile(filepath.Join(ipxeDir, "undionly.kpxe"), binary, 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "kiln.db")
	args := []string{"--listen", "0.0.0.0:6385", "--db", db, "--conductor", "c1", "--power-sync-interval", "0",
		"--dhcp", "full", "--dhcp-interface", seg.SrvIf, "--dhcp-range", "10.77.0.100-10.77.0.110",
		"--dhcp-router", "10.77.0.1", "--dhcp-probe", "1s", "--ipxe-dir", ipxeDir, "--boot-unknown", "discovery"}
	p := startInNS(t, seg.SrvNS, args...)
	p.waitLog(t, "DHCP server answering", "TFTP server answering", "kiln controller listening")
	if logs := p.Logs(); !strings.Contains(logs, "iPXE binaries missing") || !strings.Contains(logs, "snponly.efi") {
		t.Fatalf("no warning about the missing snponly.efi:\n%s", logs)
	}
	ctx := context.Background()
	mac := net.HardwareAddr{0x52, 0x54, 0, 0xaa, 0, 1}

	lease, err := dhcpClient(t, seg, mac).Request(ctx, pxeMods(iana.INTEL_X86PC, false)...)
	if err != nil {
		t.Fatalf("DHCP: %v\n%s", err, p.Logs())
	}
	ack := lease.ACK
	if ack.BootFileName != "undionly.kpxe" || ack.TFTPServerName() != "10.77.0.1" || fmt.Sprint(ack.Router()) != "[10.77.0.1]" {
		t.Fatalf("BIOS ACK: file %q tftp %q router %v", ack.BootFileName, ack.TFTPServerName(), ack.Router())
	}
	ip := ack.YourIPAddr.String()
	netnstest.Run(t, "ip", "-n", seg.CliNS, "addr", "add", ip+"/24", "dev", seg.CliIf)

	// TFTP, as the PXE ROM does, with a large block and the size first.
	var got bytes.Buffer
	var tsize int64
	netnstest.In(t, seg.CliNS, func() {
		c, err := tftp.NewClient("10.77.0.1:69")
		if err != nil {
			t.Error(err)
			return
		}
		c.SetBlockSize(1400)
		c.RequestTSize(true)
		wt, err := c.Receive(ack.BootFileName, "octet")
		if err != nil {
			t.Error(err)
			return
		}
		tsize, _ = wt.(tftp.IncomingTransfer).Size()
		_, err = wt.WriteTo(&got)
		if err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	if !bytes.Equal(got.Bytes(), binary) || tsize != int64(len(binary)) {
		t.Fatalf("TFTP gave %d bytes (tsize %d), want %d", got.Len(), tsize, len(binary))
	}

	// iPXE asks again and is chained to the script, at a URL the client reaches.
	lease2, err := dhcpClient(t, seg, mac).Request(ctx, pxeMods(iana.INTEL_X86PC, true)...)
	if err != nil {
		t.Fatal(err)
	}
	script := lease2.ACK.BootFileName
	if script != "http://10.77.0.1:6385/boot/boot.ipxe" || lease2.ACK.YourIPAddr.String() != ip {
		t.Fatalf("iPXE ACK: file %q address %s (had %s)", script, lease2.ACK.YourIPAddr, ip)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		var err error
		netnstest.In(t, seg.CliNS, func() { c, err = (&net.Dialer{}).DialContext(ctx, network, addr) })
		return c, err
	}}, Timeout: 30 * time.Second}
	for _, u := range []string{script, script + "?mac=" + mac.String(), "http://10.77.0.1:6385/boot/ipxe/undionly.kpxe"} {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
		}
		if strings.HasSuffix(u, ".kpxe") && !bytes.Equal(body, binary) {
			t.Fatalf("GET %s: wrong content", u)
		}
		if strings.Contains(u, ".ipxe") && !strings.HasPrefix(string(body), "#!ipxe") {
			t.Fatalf("GET %s: not an iPXE script: %s", u, body)
		}
		// --listen 0.0.0.0 without --api-url: the agent's URLs must name
		// the interface's address, which the machine reaches.
		if strings.Contains(u, "?mac=") && (!strings.Contains(string(body), "http://10.77.0.1:6385/boot/files/kiln-agent.kernel") ||
			strings.Contains(string(body), "[::]")) {
			t.Fatalf("GET %s: the agent is not loaded from the interface's address:\n%s", u, body)
		}
	}

	// A second full server on the segment is refused at start.
	netnstest.Run(t, "ip", "-n", seg.CliNS, "addr", "add", "10.77.0.2/24", "dev", seg.CliIf)
	out, err := exec.Command("ip", "netns", "exec", seg.CliNS, kilnBin, "serve", "--listen", "0.0.0.0:6386",
		"--db", filepath.Join(t.TempDir(), "other.db"), "--dhcp", "full", "--dhcp-interface", seg.CliIf,
		"--dhcp-range", "10.77.0.200-10.77.0.210", "--dhcp-probe", "2s", "--ipxe-dir", ipxeDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another DHCP server answers there: 10.77.0.1 (address server)") {
		t.Fatalf("a second full DHCP server started beside the first (%v):\n%s", err, out)
	}

	// Leases live in the database: after a restart the MAC keeps its address.
	p.stop(t)
	p = startInNS(t, seg.SrvNS, args...)
	p.waitLog(t, "DHCP server answering")
	lease3, err := dhcpClient(t, seg, mac).Request(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lease3.ACK.YourIPAddr.String() != ip {
		t.Fatalf("after a restart %s got %s, had %s", mac, lease3.ACK.YourIPAddr, ip)
	}
}

func TestBootBaseURL(t *testing.T) {
	iface := netip.MustParseAddr("10.0.0.1")
	for _, tc := range []struct{ api, want string }{
		{"http://[::]:6385", "http://10.0.0.1:6385"},
		{"http://0.0.0.0:6385/", "http://10.0.0.1:6385"},
		{"http://ctrl.example:6385", "http://ctrl.example:6385"},
		{"https://10.0.0.5", "https://10.0.0.5"},
		{"http://127.0.0.1:6385", "error"},
		{"http://localhost:6385", "error"},
		{"not a url", "error"},
	} {
		got, err := bootBaseURL(tc.api, iface)
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("bootBaseURL(%q) = %q (%v), want %q", tc.api, got, err, tc.want)
		}
	}
}

func TestServeNetbootFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dhcp", "maybe"}, "--dhcp must be off, proxy or full"},
		{[]string{"--dhcp", "proxy"}, "need --dhcp-interface"},
		{[]string{"--dhcp", "proxy", "--dhcp-interface", "kiln-nonexistent0"}, "--dhcp-interface kiln-nonexistent0"},
		{[]string{"--dhcp", "full", "--dhcp-interface", "lo"}, "a controller URL the machines reach"}, // loopback API URL
	} {
		out, err := exec.Command(kilnBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "k.db")}, tc.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("kiln serve %v: %v, want an error containing %q:\n%s", tc.args, err, tc.want, out)
		}
	}
}
