//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
)

// The scenarios run in parallel (each calls t.Parallel; make e2e's
// E2E_PARALLEL, go test's -parallel, bounds how many at once): a QEMU
// guest spends most of a scenario waiting on firmware, DHCP, the agent's
// heartbeats and the controller. What they share is this process and the
// host, so each scenario has its own temporary directory (database, VM
// state, disk), its own kiln serve, BMC simulator and image server on
// ports of their own, its own QEMU user network (slirp is per VM) or its
// own network namespaces named after the scenario, and no scenario
// changes process-wide state (http.DefaultTransport, environment,
// working directory). test/e2e/README.md lists what a new scenario must
// do to keep it so.

var macSeq atomic.Uint32

// newMAC is a locally administered QEMU MAC (52:54:00:…) unique in this
// run: kind marks the network (e2 user networking, 77 a DHCP bridge), then
// the process and a counter, so two machines never share an address, nor
// their names in logs.
func newMAC(kind string) string {
	return fmt.Sprintf("52:54:00:%s:%02x:%02x", kind, os.Getpid()&0xff, macSeq.Add(1)&0xff)
}

var (
	addrMu    sync.Mutex
	addrGiven = map[string]bool{}
)

// freeAddr is kilnproc.FreeAddr that never hands out the same address
// twice in this process: the port is closed until kiln serve or QEMU
// binds it, and the kernel may offer a port just closed to the next
// caller, another scenario running at the same time.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		a := kilnproc.FreeAddr(t)
		addrMu.Lock()
		seen := addrGiven[a]
		addrGiven[a] = true
		addrMu.Unlock()
		if !seen {
			return a
		}
	}
	t.Fatal("no unused loopback port in 100 tries")
	return ""
}
