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
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/netnstest"
)

var kilnBin string

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
func find(logs string, want ...string) (logLine, bool) {
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
		return logLine{at: at, text: l}, true
	}
	return logLine{}, false
}

// waitFor waits until every step has a log line and returns them; the
// deadline only stops a hang (TCG under load is slow).
func waitFor(t *testing.T, kiln *logBuf, serial string, steps [][]string) []logLine {
	t.Helper()
	deadline := time.Now().Add(8 * time.Minute)
	for {
		var got []logLine
		logs := kiln.String()
		for _, s := range steps {
			l, ok := find(logs, s...)
			if !ok {
				break
			}
			got = append(got, l)
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
	t.Helper()
	ns = fmt.Sprintf("kiln-qemu-%d-%s", os.Getpid(), strings.ToLower(t.Name()[4:]))
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
	kiln = &logBuf{}
	start(t, ns, kiln, kilnBin, "serve", "--listen", "0.0.0.0:6385", "--db", filepath.Join(t.TempDir(), "kiln.db"),
		"--power-sync-interval", "0", "--boot-dir", t.TempDir(),
		"--dhcp", "full", "--dhcp-interface", "br0", "--dhcp-range", "10.77.0.100-10.77.0.150", "--dhcp-probe", "1s")
	waitFor(t, kiln, "", [][]string{{"DHCP server answering"}, {"TFTP server answering"}})
	return ns, kiln
}

func qemuArgs(dir, mac string) []string {
	return []string{"qemu-system-x86_64", "-machine", "q35", "-accel", "tcg", "-m", "256",
		"-nographic", "-monitor", "none", "-no-reboot", "-serial", "file:" + filepath.Join(dir, "serial.log"),
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no", "-boot", "strict=on"}
}

// TestBIOSBootsFromKilnDHCP: SeaBIOS runs QEMU's iPXE ROM, which asks DHCP
// as iPXE and is chained straight to the controller's script.
func TestBIOSBootsFromKilnDHCP(t *testing.T) {
	require(t)
	ns, kiln := lab(t)
	dir := t.TempDir()
	const mac = "52:54:00:77:00:01"
	start(t, ns, io.Discard, append(qemuArgs(dir, mac), "-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1")...)
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
	const code, vars = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
	require(t, code, vars, "/usr/lib/ipxe/snponly.efi")
	ns, kiln := lab(t)
	dir := t.TempDir()
	v, err := os.ReadFile(vars)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vars.fd"), v, 0o600); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:77:00:02"
	start(t, ns, io.Discard, append(qemuArgs(dir, mac),
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
		"-drive", "if=pflash,format=raw,unit=1,file="+filepath.Join(dir, "vars.fd"),
		"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1,romfile=")...)
	got := waitFor(t, kiln, filepath.Join(dir, "serial.log"), [][]string{
		{"DHCP boot answer", "mac=" + mac, "type=DISCOVER", "firmware=uefi-x64", "boot_file=snponly.efi"},
		{"TFTP transfer", "file=snponly.efi"},
		{"DHCP boot answer", "mac=" + mac, "firmware=ipxe", "boot_file=http://10.77.0.1:6385/boot/boot.ipxe"},
		{"iPXE script", "mac=" + mac},
	})
	t.Logf("TIMING UEFI (OVMF PXE): DHCP offer → snponly.efi sent %.2fs → iPXE's DHCP %.2fs → script fetched by MAC %.2fs",
		got[1].at.Sub(got[0].at).Seconds(), got[2].at.Sub(got[0].at).Seconds(), got[3].at.Sub(got[0].at).Seconds())
}
