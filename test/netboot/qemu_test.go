//go:build e2e

// Package netboot boots QEMU machines from kiln serve's own DHCP and TFTP:
// real firmware (SeaBIOS with QEMU's iPXE ROM, OVMF with its native PXE)
// on a bridge in a network namespace, no QEMU user networking, no dnsmasq.
// It checks the chain up to the controller's iPXE script, which is where
// DHCP's part ends, and logs how long each step took.
package netboot

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/netnstest"
)

var kilnBin string

var labSeq atomic.Int64

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin) }

// logBuf collects a process's output.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// start runs a command in the namespace, stopped (SIGTERM, then SIGKILL)
// when the test ends.
func start(t *testing.T, ns string, out io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

// logLine is one logfmt line of kiln serve's log.
type logLine struct {
	at   time.Time
	text string
}

// find returns the first line of logs containing all of want.
func find(logs string, want ...string) (logLine, bool) { return findFrom(logs, time.Time{}, want...) }

// findFrom is find among the lines logged at or after from.
func findFrom(logs string, from time.Time, want ...string) (logLine, bool) {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if !ok {
			continue
		}
		var at time.Time
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "time=") {
			at, _ = time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time="))
		}
		if at.Before(from) {
			continue
		}
		return logLine{at: at, text: l}, true
	}
	return logLine{}, false
}

// waitFor waits until every step has a log line, each logged no earlier
// than the previous step's, and returns them; the deadline only stops a
// hang (TCG under load is slow).
func waitFor(t *testing.T, kiln *logBuf, serial string, steps [][]string) []logLine {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var got []logLine
		logs := kiln.String()
		var from time.Time
		for _, s := range steps {
			l, ok := findFrom(logs, from, s...)
			if !ok {
				break
			}
			got = append(got, l)
			from = l.at
		}
		if len(got) == len(steps) {
			return got
		}
		if time.Now().After(deadline) {
			con, _ := os.ReadFile(serial)
			t.Fatalf("no log line with %q; kiln:\n%s\nconsole:\n%s", steps[len(got)], logs, tail(string(con), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func require(t *testing.T, files ...string) {
	t.Helper()
	netnstest.Require(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skipf("qemu-system-x86_64 not installed: %v", err)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%s missing (install Debian's ipxe and ovmf packages): %v", f, err)
		}
	}
}

// lab is a namespace with a bridge (the controller's 10.77.0.1/24) and a
// tap on it for QEMU, and kiln serve with --dhcp full on the bridge.
func lab(t *testing.T) (ns string, kiln *logBuf) {
	ns = newLab(t)
	kiln = startKiln(t, ns, "--dhcp", "full", "--dhcp-range", "10.77.0.100-10.77.0.150")
	// Full mode answers router solicitations, so that iPXE does not wait
	// for an IPv6 router that the lab does not have.
	waitFor(t, kiln, "", [][]string{{"answering IPv6 router solicitations"}})
	return ns, kiln
}

func newLab(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("kiln-qemu-%d-%d", os.Getpid(), labSeq.Add(1))
	netnstest.Run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "br0", "type", "bridge", "forward_delay", "0"},
		{"addr", "add", "10.77.0.1/24", "dev", "br0"},
		{"link", "set", "br0", "up"},
		{"tuntap", "add", "tap0", "mode", "tap"},
		{"link", "set", "tap0", "master", "br0"},
		{"link", "set", "tap0", "up"},
	} {
		netnstest.Run(t, append([]string{"ip", "-n", ns}, args...)...)
	}
	return ns
}

func startKiln(t *testing.T, ns string, args ...string) *logBuf {
	t.Helper()
	kiln := &logBuf{}
	base := []string{kilnBin, "serve", "--listen", "0.0.0.0:6385", "--db", filepath.Join(t.TempDir(), "kiln.db"),
		"--power-sync-interval", "0", "--dhcp-interface", "br0"}
	if !strings.Contains(strings.Join(args, " "), "--boot-dir") {
		base = append(base, "--boot-dir", t.TempDir())
	}
	start(t, ns, kiln, append(base, args...)...)
	waitFor(t, kiln, "", [][]string{{"DHCP server answering"}, {"TFTP server answering"}})
	return kiln
}

func qemuArgs(dir, tap string) []string {
	return []string{"qemu-system-x86_64", "-machine", "q35", "-accel", "tcg", "-cpu", "max", "-m", "1024",
		"-nographic", "-monitor", "none", "-no-reboot", "-serial", "file:" + filepath.Join(dir, "serial.log"),
		"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no", "-boot", "strict=on"}
}

// TestBIOSBootsFromKilnDHCP: SeaBIOS runs QEMU's iPXE ROM, which asks DHCP
// as iPXE and is chained straight to the controller's script.
func TestBIOSBootsFromKilnDHCP(t *testing.T) {
	t.Parallel() // its own namespace, bridge and controller; no kernel boots
	require(t)
	ns, kiln := lab(t)
	const mac = "52:54:00:77:00:01"
	dir := startBIOS(t, ns, mac)
	got := waitFor(t, kiln, filepath.Join(dir, "serial.log"), [][]string{
		{"DHCP boot answer", "mac=" + mac, "type=DISCOVER", "firmware=ipxe", "boot_file=http://10.77.0.1:6385/boot/boot.ipxe"},
		{"DHCP boot answer", "mac=" + mac, "type=REQUEST", "reply=ACK", "firmware=ipxe"},
		{"iPXE script", "mac=" + mac},
	})
	t.Logf("TIMING BIOS (iPXE ROM): DHCP offer → ACK %.2fs → script fetched by MAC %.2fs",
		got[1].at.Sub(got[0].at).Seconds(), got[2].at.Sub(got[0].at).Seconds())
}

// TestUEFIBootsFromKilnDHCP: OVMF without the iPXE option ROM runs its own
// PXE: DHCP as x86-64 UEFI, snponly.efi by TFTP from Debian's ipxe
// package, then that iPXE asks DHCP again and is chained to the script.
func TestUEFIBootsFromKilnDHCP(t *testing.T) {
	t.Parallel() // its own namespace, bridge and controller; no kernel boots
	require(t, ovmfCode, ovmfVars, "/usr/lib/ipxe/snponly.efi")
	ns, kiln := lab(t)
	const mac = "52:54:00:77:00:02"
	dir := startUEFI(t, ns, mac)
	got := waitFor(t, kiln, filepath.Join(dir, "serial.log"), [][]string{
		{"DHCP boot answer", "mac=" + mac, "type=DISCOVER", "firmware=uefi-x64", "boot_file=snponly.efi"},
		{"TFTP transfer", "file=snponly.efi"},
		{"DHCP boot answer", "mac=" + mac, "firmware=ipxe", "boot_file=http://10.77.0.1:6385/boot/boot.ipxe"},
		{"iPXE script", "mac=" + mac},
	})
	t.Logf("TIMING UEFI (OVMF PXE): DHCP offer → snponly.efi sent %.2fs → iPXE's DHCP %.2fs → script fetched by MAC %.2fs",
		got[1].at.Sub(got[0].at).Seconds(), got[2].at.Sub(got[0].at).Seconds(), got[3].at.Sub(got[0].at).Seconds())
}

const ovmfCode, ovmfVars = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"

// startBIOS powers on a SeaBIOS machine whose NIC boots QEMU's iPXE ROM.
func startBIOS(t *testing.T, ns, mac string) (dir string) {
	dir = t.TempDir()
	start(t, ns, io.Discard, append(qemuArgs(dir, "tap0"), "-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1")...)
	return dir
}

// startUEFI powers on an OVMF machine whose NIC has no option ROM, so that
// OVMF's own PXE boots it.
func startUEFI(t *testing.T, ns, mac string) (dir string) { return startUEFIOn(t, ns, mac, "tap0") }

func startUEFIOn(t *testing.T, ns, mac, tap string) (dir string) {
	dir = t.TempDir()
	v, err := os.ReadFile(ovmfVars)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vars.fd"), v, 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, ns, io.Discard, append(qemuArgs(dir, tap),
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfCode,
		"-drive", "if=pflash,format=raw,unit=1,file="+filepath.Join(dir, "vars.fd"),
		"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1,romfile=")...)
	return dir
}

// TestProxyBesideDnsmasq: the segment's addresses come from a dnsmasq that
// knows nothing of network boot, on a router namespace bridged in; kiln
// serve --dhcp proxy adds the boot options. Both firmwares boot to the
// script, and every address is dnsmasq's.
func TestProxyBesideDnsmasq(t *testing.T) {
	t.Parallel() // its own namespace, bridge and controller; no kernel boots
	require(t, ovmfCode, ovmfVars, "/usr/lib/ipxe/snponly.efi")
	dnsmasq, err := exec.LookPath("dnsmasq")
	if err != nil {
		t.Skipf("dnsmasq not installed (Debian's dnsmasq-base): %v", err)
	}
	ns := newLab(t)
	router := ns + "-r"
	netnstest.Run(t, "ip", "netns", "add", router)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", router).Run() })
	netnstest.Run(t, "ip", "-n", ns, "link", "add", "uplink", "type", "veth", "peer", "name", "lan", "netns", router)
	netnstest.Run(t, "ip", "-n", ns, "link", "set", "uplink", "master", "br0")
	netnstest.Run(t, "ip", "-n", ns, "link", "set", "uplink", "up")
	netnstest.Run(t, "ip", "-n", router, "addr", "add", "10.77.0.254/24", "dev", "lan")
	netnstest.Run(t, "ip", "-n", router, "link", "set", "lan", "up")
	dm := &logBuf{}
	start(t, router, dm, dnsmasq, "--keep-in-foreground", "--log-facility=-", "--log-dhcp", "--conf-file=/dev/null",
		"--port=0", "--interface=lan", "--bind-interfaces", "--dhcp-range=10.77.0.50,10.77.0.90,1h",
		"--dhcp-leasefile="+filepath.Join(t.TempDir(), "leases"), "--pid-file="+filepath.Join(t.TempDir(), "pid"))
	waitFor(t, dm, "", [][]string{{"DHCP, IP range 10.77.0.50"}})

	kiln := startKiln(t, ns, "--dhcp", "proxy")
	if _, ok := find(kiln.String(), "DHCP server found on the segment", "server=10.77.0.254", "proxy=false"); !ok {
		t.Errorf("the start-up probe did not report dnsmasq:\n%s\ndnsmasq:\n%s", kiln.String(), dm.String())
	}
	const biosMAC, uefiMAC = "52:54:00:77:01:01", "52:54:00:77:01:02"
	biosDir := startBIOS(t, ns, biosMAC)
	bios := waitFor(t, kiln, filepath.Join(biosDir, "serial.log"), [][]string{
		{"DHCP boot answer", "mac=" + biosMAC, "dhcp=proxy", "firmware=ipxe", "boot_file=http://10.77.0.1:6385/boot/boot.ipxe", "ip=0.0.0.0"},
		{"iPXE script", "mac=" + biosMAC},
	})
	// One machine at a time: the lab has one tap.
	netnstest.Run(t, "ip", "-n", ns, "tuntap", "add", "tap1", "mode", "tap")
	netnstest.Run(t, "ip", "-n", ns, "link", "set", "tap1", "master", "br0")
	netnstest.Run(t, "ip", "-n", ns, "link", "set", "tap1", "up")
	uefiDir := startUEFIOn(t, ns, uefiMAC, "tap1")
	uefi := waitFor(t, kiln, filepath.Join(uefiDir, "serial.log"), [][]string{
		{"DHCP boot answer", "mac=" + uefiMAC, "dhcp=proxy", "firmware=uefi-x64", "boot_file=snponly.efi"},
		{"TFTP transfer", "file=snponly.efi"},
		{"DHCP boot answer", "mac=" + uefiMAC, "dhcp=proxy", "firmware=ipxe"},
		{"iPXE script", "mac=" + uefiMAC},
	})
	for _, mac := range []string{biosMAC, uefiMAC} {
		if _, ok := find(dm.String(), "DHCPACK(lan) 10.77.0.", mac); !ok {
			t.Errorf("dnsmasq gave %s no address:\n%s", mac, dm.String())
		}
	}
	t.Logf("TIMING proxy BIOS (iPXE ROM): proxy offer → script %.2fs", bios[1].at.Sub(bios[0].at).Seconds())
	t.Logf("TIMING proxy UEFI (OVMF PXE): proxy offer → snponly.efi sent %.2fs → script %.2fs",
		uefi[1].at.Sub(uefi[0].at).Seconds(), uefi[3].at.Sub(uefi[0].at).Seconds())
}

// bootDir is where make initramfs put the agent: $KILN_BOOT_DIR or the
// repository's out/.
func bootDir(t *testing.T) string {
	dir := os.Getenv("KILN_BOOT_DIR")
	if dir == "" {
		dir = "../../out"
	}
	for _, f := range []string{"kiln-agent.kernel", "kiln-agent.initramfs"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Skipf("no agent in %s (make initramfs builds it): %v", dir, err)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// discoveryRules give every discovered QEMU machine the ipmi driver.
const discoveryRules = `
- uuid: qemu-lab
  conditions:
    - {op: is-true, args: {value: "{plugin_data[auto_discovered]}"}}
  actions:
    - {op: set-attribute, args: {path: /driver, value: ipmi}}
    - {op: set-attribute, args: {path: /resource_class, value: qemu}}
`

// TestUnknownMachineBootsTheAgent: with --boot-unknown discovery, a
// machine no node has PXE-boots through Kiln's DHCP into the agent, which
// inspects it; its report enrolls it and the inspection rule sets its
// driver. The times from the firmware's DHCP offer are the network-boot
// part of a provisioning.
func TestUnknownMachineBootsTheAgent(t *testing.T) {
	require(t, ovmfCode, ovmfVars, "/usr/lib/ipxe/snponly.efi")
	agent := bootDir(t)
	ns := newLab(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(discoveryRules), 0o600); err != nil {
		t.Fatal(err)
	}
	kiln := startKiln(t, ns, "--dhcp", "full", "--dhcp-range", "10.77.0.100-10.77.0.150",
		"--boot-unknown", "discovery", "--boot-dir", agent, "--log-level", "debug", "--inspection-rules", rules)
	netnstest.Run(t, "ip", "-n", ns, "tuntap", "add", "tap1", "mode", "tap")
	netnstest.Run(t, "ip", "-n", ns, "link", "set", "tap1", "master", "br0")
	netnstest.Run(t, "ip", "-n", ns, "link", "set", "tap1", "up")
	for _, m := range []struct {
		name, mac, firstDHCP string
	}{
		{"BIOS", "52:54:00:77:02:01", "firmware=ipxe"},
		{"UEFI", "52:54:00:77:02:02", "firmware=uefi-x64"},
	} {
		t.Run(m.name, func(t *testing.T) {
			var dir string
			if m.name == "BIOS" {
				dir = startBIOS(t, ns, m.mac)
			} else {
				dir = startUEFIOn(t, ns, m.mac, "tap1")
			}
			got := waitFor(t, kiln, filepath.Join(dir, "serial.log"), [][]string{
				{"DHCP boot answer", "mac=" + m.mac, "type=DISCOVER", m.firstDHCP},
				{"iPXE script", "mac=" + m.mac, "action=discovery"},
				{"DHCP answer", "mac=" + m.mac, "reply=ACK"}, // the agent's own lease
				// Its first API call is its inspection report, which enrolls
				// it; the rule sets its driver.
				{"agent call", "endpoint=continue_inspection"},
				{"discovered machine enrolled", "driver=ipmi", "macs=[" + m.mac + "]", "rules=[qemu-lab]"},
			})
			t.Logf("TIMING %s discovery: DHCP offer → agent script %.2fs → agent's DHCP %.2fs → its inspection report %.2fs → enrolled %.2fs",
				m.name, got[1].at.Sub(got[0].at).Seconds(), got[2].at.Sub(got[0].at).Seconds(), got[3].at.Sub(got[0].at).Seconds(),
				got[4].at.Sub(got[0].at).Seconds())
		})
	}
}
