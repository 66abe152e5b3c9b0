// Package netnstest gives tests a network segment of their own: a server
// namespace and a client namespace joined by a veth pair, so that DHCP,
// TFTP and broadcasts run on real sockets without touching the host's
// network. It needs root and iproute2 and skips, saying why, without them.
package netnstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
)

var seq atomic.Int64

// Require skips t unless network namespaces can be made.
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("ip (iproute2) not installed: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
}

// Run runs a command and fails t if it fails.
func Run(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// Segment is a server namespace and a client namespace on one veth pair.
type Segment struct {
	SrvNS, CliNS string // namespace names (ip netns)
	SrvIf, CliIf string // the veth ends
}

// New makes a segment, removed when t ends; the server end gets addr
// (CIDR), the client end none.
func New(t testing.TB, addr string) Segment {
	t.Helper()
	Require(t)
	n := seq.Add(1)
	s := Segment{
		SrvNS: fmt.Sprintf("kiln-s%d-%d", os.Getpid(), n), CliNS: fmt.Sprintf("kiln-c%d-%d", os.Getpid(), n),
		SrvIf: "kiln-srv", CliIf: "kiln-cli",
	}
	for _, ns := range []string{s.SrvNS, s.CliNS} {
		Run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		Run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		// Link-local IPv6 addresses usable at once, not after a second of
		// duplicate address detection.
		Run(t, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0")
	}
	Run(t, "ip", "-n", s.SrvNS, "link", "add", s.SrvIf, "type", "veth", "peer", "name", s.CliIf, "netns", s.CliNS)
	Run(t, "ip", "-n", s.SrvNS, "addr", "add", addr, "dev", s.SrvIf)
	Run(t, "ip", "-n", s.SrvNS, "link", "set", s.SrvIf, "up")
	Run(t, "ip", "-n", s.CliNS, "link", "set", s.CliIf, "up")
	return s
}

// In runs fn on an OS thread inside the named namespace. Sockets opened
// there stay in it; the thread is thrown away afterwards (never unlocked),
// so no other goroutine ever runs in the namespace.
func In(t testing.TB, name string, fn func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(name)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		fn()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatalf("enter namespace %s: %v", name, err)
	}
}

// Listen opens a TCP listener on addr inside the named namespace, for a
// server of the test process that programs in the namespace must reach.
func Listen(t testing.TB, name, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	In(t, name, func() { ln, err = net.Listen("tcp", addr) })
	if err != nil {
		t.Fatalf("listen on %s in namespace %s: %v", addr, name, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// DialContext dials from inside the named namespace, as an http.Transport's
// DialContext: the test process reaches a server that listens only there.
// Each dial runs on its own OS thread, thrown away afterwards.
func DialContext(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		res := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			h, err := netns.GetFromName(name)
			if err != nil {
				res <- result{err: err}
				return
			}
			defer h.Close()
			if err := netns.Set(h); err != nil {
				res <- result{err: err}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			res <- result{c, err}
		}()
		r := <-res
		return r.c, r.err
	}
}
