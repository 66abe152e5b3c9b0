//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/netnstest"
)

// The DHCP scenarios provision a machine whose network is kiln serve's
// alone: a network namespace holds a bridge (the controller's 10.77.0.1/24)
// and the QEMU machine's tap on it; kiln serve --dhcp full answers DHCP and
// TFTP on the bridge, and the BMC simulator and the image server listen
// inside the namespace. No QEMU user networking; no dnsmasq, but in the
// proxy scenario, where one that only hands out addresses stands beside.
const (
	dhcpNet  = "10.77.0"
	dhcpKiln = dhcpNet + ".1:6385"
)

// dhcpLab is a lab whose machine boots through kiln serve --dhcp.
type dhcpLab struct {
	*lab
	mode    string  // full, or proxy beside dnsmasq
	dnsmasq *logBuf // proxy: the address server's log
}

// newDHCPLab is newLab on a bridge in a namespace of its own. In full mode
// kiln serve is the only DHCP server there; in proxy mode a dnsmasq that
// knows nothing of network boot hands out the addresses, from a router
// namespace bridged in, and kiln serve adds the boot answers.
func newDHCPLab(t *testing.T, name, mode string, uefi bool) *dhcpLab {
	t.Helper()
	netnstest.Require(t)
	if uefi {
		if _, err := os.Stat("/usr/lib/ipxe/snponly.efi"); err != nil {
			t.Skipf("OVMF's PXE loads iPXE's snponly.efi by TFTP (apt-get install ipxe): %v", err)
		}
	}
	ns := fmt.Sprintf("kiln-e2e-%d-%s", os.Getpid(), name)
	netnstest.Run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "br0", "type", "bridge", "forward_delay", "0"},
		{"addr", "add", dhcpNet + ".1/24", "dev", "br0"},
		{"link", "set", "br0", "up"},
		{"tuntap", "add", "tap0", "mode", "tap"},
		{"link", "set", "tap0", "master", "br0"},
		{"link", "set", "tap0", "up"},
	} {
		netnstest.Run(t, append([]string{"ip", "-n", ns}, args...)...)
	}

	dl := &dhcpLab{mode: mode}
	kilnDHCP := []string{"--dhcp", "full", "--dhcp-range", dhcpNet + ".100-" + dhcpNet + ".150"}
	if mode == "proxy" {
		dl.dnsmasq = startDnsmasq(t, ns)
		kilnDHCP = []string{"--dhcp", "proxy"}
	}

	dir, err := os.MkdirTemp("", "ke2e-")
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{t: t, name: name, dir: dir, db: filepath.Join(dir, "kiln.db"), addr: dhcpKiln,
		client: &http.Client{Transport: &http.Transport{DialContext: netnstest.DialContext(ns)}}}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "vm", "serial.log")); err == nil {
				t.Logf("serial log (last 6 KiB):\n%s", tail(string(b), 6144))
			}
		}
		os.RemoveAll(dir)
	})
	l.kiln = kilnproc.StartIn(t, ns, l.client, kilnBin, l.db, l.addr, append(kilnDHCP,
		"--dhcp-interface", "br0", "--boot-dir", filepath.Join(repoRoot, "out"),
		"--callback-timeout", "6m", "--power-sync-interval", "0", "--log-level", "debug")...)
	for _, want := range []string{"DHCP server answering", "TFTP server answering"} {
		deadline := time.Now().Add(time.Minute) // a safety net; it logs this at start
		for !strings.Contains(l.kiln.Logs(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("kiln serve did not log %q:\n%s", want, l.kiln.Logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The guest and the test reach the image server at the same address.
	ln := netnstest.Listen(t, ns, dhcpNet+".1:0")
	l.images = serveImages(t, ln, "http://"+ln.Addr().String())

	disk := filepath.Join(dir, "disk.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "4G").CombinedOutput(); err != nil {
		t.Fatalf("create disk: %v: %s", err, out)
	}
	l.mac = newMAC("77")
	cfg := bmcsim.QEMUConfig{Dir: filepath.Join(dir, "vm"), UEFI: uefi, MAC: l.mac, Disk: disk,
		Tap: "tap0", NetNS: ns, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if uefi {
		// No option ROM: OVMF's own PXE asks DHCP as x86-64 UEFI and loads
		// iPXE from kiln's TFTP, as a server's firmware would.
		noROM := ""
		cfg.NICROMFile = &noROM
	}
	vm, err := bmcsim.NewQEMU(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := bmcsim.NewService(bmcsim.Config{Systems: []bmcsim.SystemConfig{{Backend: vm}}})
	if err != nil {
		t.Fatal(err)
	}
	// The BMC listens on the namespace's loopback, where the controller is.
	netnstest.In(t, ns, func() { l.bmc, err = bmcsim.Listen("127.0.0.1:0", svc) })
	if err != nil {
		t.Fatal(err)
	}
	l.vm = vm
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = vm.Close(ctx)
		l.bmc.Close()
	})
	dl.lab = l
	return dl
}

// logBuf collects a process's output.
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDnsmasq runs, in a router namespace whose veth is on ns's bridge, a
// dnsmasq that only hands out addresses (10.77.0.50-90), as a site's DHCP
// server beside kiln serve --dhcp proxy would.
func startDnsmasq(t *testing.T, ns string) *logBuf {
	t.Helper()
	dnsmasq, err := exec.LookPath("dnsmasq")
	if err != nil {
		t.Skipf("dnsmasq not installed (Debian's dnsmasq-base): %v", err)
	}
	router := ns + "-r"
	netnstest.Run(t, "ip", "netns", "add", router)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", router).Run() })
	for _, args := range [][]string{
		{"-n", ns, "link", "add", "uplink", "type", "veth", "peer", "name", "lan", "netns", router},
		{"-n", ns, "link", "set", "uplink", "master", "br0"},
		{"-n", ns, "link", "set", "uplink", "up"},
		{"-n", router, "addr", "add", dhcpNet + ".254/24", "dev", "lan"},
		{"-n", router, "link", "set", "lan", "up"},
	} {
		netnstest.Run(t, append([]string{"ip"}, args...)...)
	}
	out := &logBuf{}
	cmd := exec.Command("ip", "netns", "exec", router, dnsmasq, "--keep-in-foreground", "--log-facility=-", "--log-dhcp",
		"--conf-file=/dev/null", "--port=0", "--interface=lan", "--bind-interfaces", "--dhcp-range="+dhcpNet+".50,"+dhcpNet+".90,1h",
		"--dhcp-leasefile="+filepath.Join(t.TempDir(), "leases"), "--pid-file="+filepath.Join(t.TempDir(), "pid"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(time.Minute) // a safety net
	for !strings.Contains(out.String(), "DHCP, IP range "+dhcpNet+".50") {
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq did not start:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out
}

// kilnLine is one line of kiln serve's logfmt log.
type kilnLine struct {
	at   time.Time
	text string
}

// kilnLog returns the controller's log lines at or after from that contain
// every one of want.
func (l *lab) kilnLog(from time.Time, want ...string) []kilnLine {
	var out []kilnLine
	sc := bufio.NewScanner(strings.NewReader(l.kiln.Logs()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		f := strings.Fields(line)
		if !ok || len(f) == 0 || !strings.HasPrefix(f[0], "time=") {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time="))
		if err != nil || at.Before(from) {
			continue
		}
		out = append(out, kilnLine{at, line})
	}
	return out
}

// netbootTimings checks that the agent of the phase begun at p came through
// kiln's DHCP (a boot answer to the machine's DISCOVER, the iPXE script
// for its MAC, the agent's own lease) and logs offer → lookup (the agent's
// first call, from kiln's log) and offer → first heartbeat (agent_url
// seen by waitState's polling, within its 250 ms).
func (l *dhcpLab) netbootTimings(what string, p *phase, firstFirmware string) {
	l.t.Helper()
	from := p.start.Add(-time.Second) // log stamps are the controller's, same clock
	offers := l.kilnLog(from, "DHCP boot answer", "mac="+l.mac, "type=DISCOVER", firstFirmware)
	if len(offers) == 0 {
		l.t.Errorf("%s: no DHCP OFFER from kiln to %s's firmware (%s) in kiln's log", what, l.mac, firstFirmware)
		return
	}
	offer := offers[0]
	script := l.kilnLog(offer.at, "iPXE script", "mac="+l.mac)
	lookup := l.kilnLog(offer.at, "agent call", "endpoint=lookup", "source="+dhcpNet+".")
	if len(script) == 0 || len(lookup) == 0 {
		l.t.Errorf("%s: after kiln's offer at %s: iPXE script fetched %d times, agent lookups %d; want each",
			what, offer.at.Format("15:04:05.000"), len(script), len(lookup))
		return
	}
	l.timing(what+": DHCP offer → iPXE script", script[0].at.Sub(offer.at))
	if l.mode == "full" {
		lease := l.kilnLog(offer.at, "DHCP answer", "mac="+l.mac, "reply=ACK", "ip="+dhcpNet+".")
		if len(lease) == 0 {
			l.t.Errorf("%s: the agent took no lease from kiln", what)
		} else {
			l.timing(what+": DHCP offer → agent's lease", lease[0].at.Sub(offer.at))
		}
	}
	l.timing(what+": DHCP offer → agent lookup", lookup[0].at.Sub(offer.at))
	if !p.heartbeat.IsZero() {
		l.timing(what+": DHCP offer → first heartbeat", p.heartbeat.Sub(offer.at))
	}
}

// dhcpProvision is the machine's life through kiln's DHCP alone: enroll
// with redfish, manage, inspect, provide (automated clean), deploy, and
// the deployed OS boots from the disk.
func dhcpProvision(t *testing.T, name, mode string, uefi bool, firstFirmware, image, format string) {
	l := newDHCPLab(t, name, mode, uefi)
	defer l.summary()
	// The agent advertises its own lease: the controller reaches it on
	// the bridge, no port forward.
	l.enrollWith("ipxe", true, map[string]any{"kernel_append_params": guestKernelArgs})

	start := time.Now()
	l.provision("manage", nil)
	l.waitState("manageable", 2*time.Minute, nil)
	l.timing("manage", time.Since(start))

	p := l.begin()
	l.provision("inspect", nil)
	l.waitState("manageable", 8*time.Minute, p)
	l.phaseTimings("inspect", p, time.Now())
	inspect := l.kilnLog(p.start.Add(-time.Second), "DHCP boot answer", "mac="+l.mac, "type=DISCOVER", firstFirmware)
	if len(inspect) == 0 {
		t.Errorf("inspect: the machine did not boot through kiln's DHCP")
	} else if lk := l.kilnLog(inspect[0].at, "agent call", "endpoint=continue_inspection", "source="+dhcpNet+"."); len(lk) == 0 {
		t.Errorf("inspect: no inspection report from an address of kiln's range")
	} else {
		l.timing("inspect: DHCP offer → inspection report", lk[0].at.Sub(inspect[0].at))
	}
	var inv struct {
		Inventory struct {
			Interfaces []struct {
				MAC  string `json:"mac_address"`
				IPv4 string `json:"ipv4_address"`
			} `json:"interfaces"`
		} `json:"inventory"`
	}
	l.api("GET", "/v1/nodes/"+l.node+"/inventory", nil, &inv)
	agentIP := ""
	for _, i := range inv.Inventory.Interfaces {
		if strings.EqualFold(i.MAC, l.mac) && strings.HasPrefix(i.IPv4, dhcpNet+".") {
			agentIP = i.IPv4
		}
	}
	if agentIP == "" {
		t.Errorf("inventory interfaces %+v: want %s with an address of %s.0/24", inv.Inventory.Interfaces, l.mac, dhcpNet)
	}

	p = l.begin()
	l.provision("provide", nil)
	l.waitState("available", 8*time.Minute, p)
	l.phaseTimings("provide (automated clean)", p, time.Now())
	l.netbootTimings("provide", p, firstFirmware)

	l.setImage(image, format, sha256Of(t, image))
	ons := l.vm.PowerOns()
	p = l.begin()
	l.provision("active", map[string]any{"configdrive": map[string]any{
		"meta_data": map[string]any{"uuid": l.node, "hostname": "e2e-" + l.name, "name": "e2e-" + l.name},
	}})
	l.waitState("active", 8*time.Minute, p)
	l.phaseTimings("deploy", p, time.Now())
	l.netbootTimings("deploy", p, firstFirmware)
	if g, ok := l.images.last("/" + image); !ok || g.bytes == 0 {
		t.Errorf("the agent never fetched %s from the image server in the namespace", image)
	}
	// OVMF booting the disk under TCG on a loaded host can take longer
	// than checkBooted's safety net: wait with a wider one first.
	active := time.Now()
	l.waitMarker(ons, 10*time.Minute)
	l.checkBooted(ons, "good", active)
	l.checkLeases(agentIP)
}

// checkLeases checks who gave the machine its address: in full mode kiln
// (from its range, every boot answer to the machine's MAC naming an
// address), in proxy mode dnsmasq (every boot answer naming none).
func (l *dhcpLab) checkLeases(inventoryIP string) {
	l.t.Helper()
	answers := l.kilnLog(time.Time{}, "DHCP boot answer", "mac="+l.mac)
	for _, a := range answers {
		proxy := strings.Contains(a.text, "dhcp=proxy") && strings.Contains(a.text, "ip=0.0.0.0")
		if (l.mode == "proxy") != proxy {
			l.t.Errorf("%s mode, kiln answered: %s", l.mode, a.text)
		}
	}
	switch l.mode {
	case "full":
		if n := last(inventoryIP); n < 100 || n > 150 {
			l.t.Errorf("the agent's address %s is not from kiln's range %s.100-150", inventoryIP, dhcpNet)
		}
	case "proxy":
		if len(l.kilnLog(time.Time{}, "DHCP server found on the segment", "server="+dhcpNet+".254", "proxy=false")) == 0 {
			l.t.Errorf("kiln's start-up probe did not report dnsmasq")
		}
		if n := last(inventoryIP); n < 50 || n > 90 {
			l.t.Errorf("the agent's address %s is not from dnsmasq's range %s.50-90", inventoryIP, dhcpNet)
		}
		if !strings.Contains(l.dnsmasq.String(), "DHCPACK(lan) "+inventoryIP+" "+l.mac) {
			l.t.Errorf("dnsmasq never acknowledged %s for %s:\n%s", inventoryIP, l.mac, tail(l.dnsmasq.String(), 4000))
		}
	}
	l.t.Logf("%d boot answers from kiln to %s (%s mode); the agent's address %s", len(answers), l.mac, l.mode, inventoryIP)
}

// last is the last octet of an IPv4 address (-1 if it is none).
func last(ip string) int {
	i := strings.LastIndex(ip, ".")
	n, err := strconv.Atoi(ip[i+1:])
	if i < 0 || err != nil {
		return -1
	}
	return n
}

// TestDHCPFullBIOS: SeaBIOS with QEMU's iPXE ROM gets its address and the
// script URL from kiln serve --dhcp full, and is inspected, cleaned,
// deployed, and boots the image from its disk.
func TestDHCPFullBIOS(t *testing.T) {
	t.Parallel()
	dhcpProvision(t, "dhcp-bios", "full", false, "firmware=ipxe", "good.qcow2", "qcow2")
}

// TestDHCPFullUEFI: OVMF's native PXE gets snponly.efi by kiln's TFTP,
// whose iPXE is then chained to the script; deploys a zstd raw image.
func TestDHCPFullUEFI(t *testing.T) {
	t.Parallel()
	dhcpProvision(t, "dhcp-uefi", "full", true, "firmware=uefi-x64", "good.raw.zst", "raw")
}

// TestDHCPProxyUEFI: the site's dnsmasq gives the addresses and kiln serve
// --dhcp proxy the boot answers (OVMF's PXE, then iPXE); the machine is
// inspected, cleaned and deployed, and boots from its disk.
func TestDHCPProxyUEFI(t *testing.T) {
	t.Parallel()
	dhcpProvision(t, "proxy-uefi", "proxy", true, "firmware=uefi-x64", "good.qcow2", "qcow2")
}
