package api_test

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
)

// hostAddr is a free port on a non-loopback address of this host: requests
// from this host to it come from that address, as an agent's come from its
// own, and are subject to the lookup limit (loopback is exempt).
func hostAddr(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ipn.IP.String(), "0"))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Skip("this host has no non-loopback IPv4 address to call kiln serve from; the lookup limit exempts loopback")
	return ""
}

// TestLookupRateLimitFlags: kiln serve's --agent-lookup-rate and
// --agent-lookup-burst limit /v1/lookup and /v1/continue_inspection per
// source address, with 429, Retry-After and a log line naming the address.
func TestLookupRateLimitFlags(t *testing.T) {
	t.Parallel()
	addr := hostAddr(t)
	p := kilnproc.StartAddr(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), addr,
		"--conductor", "test-conductor", "--agent-lookup-rate", "0.01", "--agent-lookup-burst", "3")
	k := &kiln{Proc: p, t: t}
	for i := range 3 {
		if code, _, b := k.call("GET", fmt.Sprintf("/v1/lookup?addresses=52:54:00:12:34:%02x", i+1), ""); code != 404 {
			t.Fatalf("lookup %d within the burst: %d %s", i+1, code, b)
		}
	}
	code, h, b := k.call("GET", "/v1/lookup?addresses=52:54:00:12:34:09", "")
	if code != http.StatusTooManyRequests {
		t.Fatalf("lookup past the burst: %d %s, want 429", code, b)
	}
	if h.Get("Retry-After") == "" || !strings.Contains(faultstring(t, b), "Too many lookup requests") {
		t.Errorf("429 without Retry-After or Ironic's error body: %v %s", h, b)
	}
	if code, _, b := k.call("POST", "/v1/continue_inspection", `{"inventory":{"interfaces":[]}}`); code != http.StatusTooManyRequests {
		t.Errorf("continue_inspection from the same address: %d %s, want 429", code, b)
	}
	host, _, _ := net.SplitHostPort(addr)
	k.stop()
	logs := k.Logs()
	if !strings.Contains(logs, "rate limit reached") || !strings.Contains(logs, "source="+host) {
		t.Errorf("the refusal is not logged with the source address %s:\n%s", host, logs)
	}
}
