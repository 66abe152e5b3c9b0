package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/ratelimit"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// mediaTokenBoot is a boot interface whose media carry the agent token, as
// redfish-virtual-media does.
type mediaTokenBoot struct{}

func (mediaTokenBoot) CarriesAgentToken(*proto.Node) bool { return true }
func (mediaTokenBoot) Validate(context.Context, *proto.Node) error {
	return nil
}
func (mediaTokenBoot) PrepareRamdisk(context.Context, *proto.Node, driver.RamdiskParams) error {
	return nil
}
func (mediaTokenBoot) CleanUpRamdisk(context.Context, *proto.Node) error  { return nil }
func (mediaTokenBoot) PrepareInstance(context.Context, *proto.Node) error { return nil }

func init() {
	driver.RegisterBoot("api-test-media-token", mediaTokenBoot{})
	driver.Register(driver.HardwareType{
		Name: "api-test-media-hardware",
		Supported: map[string][]string{
			"power": {"fake"}, "boot": {"api-test-media-token"}, "management": {"fake"},
			"deploy": {"fake"}, "inspect": {"fake"}, "network": {"noop"}, "storage": {"noop"}, "bios": {"no-bios"},
			"console": {"no-console"}, "firmware": {"no-firmware"}, "raid": {"no-raid"}, "rescue": {"no-rescue"}, "vendor": {"no-vendor"},
		},
		BootDevices: []string{"pxe", "disk"},
	})
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type agentAPI struct {
	t     *testing.T
	h     http.Handler
	st    store.Store
	clock *fakeClock
	logs  *logBuffer
}

// newAgentAPI serves the API with a limiter of rate/s and burst on a fake
// clock. Requests are served in process, so the source address is whatever
// the test says.
func newAgentAPI(t *testing.T, rate float64, burst int) *agentAPI {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := &agentAPI{t: t, st: st, clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, logs: &logBuffer{}}
	a.h = api.New(api.Config{Store: st, Conductor: "c1",
		Logger:     slog.New(slog.NewTextHandler(a.logs, nil)),
		AgentLimit: ratelimit.New(ratelimit.Config{Rate: rate, Burst: burst, Now: a.clock.now})})
	return a
}

func (a *agentAPI) node(t *testing.T, uuid, mac string, state proto.ProvisionState, dii proto.Dict, boot string) {
	t.Helper()
	ctx := context.Background()
	n := &proto.Node{UUID: uuid, Driver: "fake-hardware", ProvisionState: state, DriverInternalInfo: dii}
	if boot != "" {
		n.Driver, n.BootInterface = "api-test-media-hardware", boot
		n.PowerInterface, n.ManagementInterface, n.InspectInterface = "fake", "fake", "fake"
	}
	if err := a.st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := a.st.CreatePort(ctx, &proto.Port{UUID: "ffffffff" + uuid[8:], NodeUUID: uuid, Address: mac}); err != nil {
		t.Fatal(err)
	}
}

func (a *agentAPI) do(method, path, from, body string) *httptest.ResponseRecorder {
	a.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr = from
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, req)
	return w
}

func (a *agentAPI) lookup(mac, from string) (int, proto.LookupResponse) {
	a.t.Helper()
	w := a.do("GET", "/v1/lookup?addresses="+mac, from, "")
	var doc proto.LookupResponse
	if w.Code == 200 {
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			a.t.Fatalf("lookup answer: %v: %s", err, w.Body)
		}
	}
	return w.Code, doc
}

func TestAgentCallsRateLimitedPerAddress(t *testing.T) {
	a := newAgentAPI(t, 1, 2)
	const attacker, other = "192.0.2.10:40000", "192.0.2.11:40000"
	// MACs no node has: each guess costs a token all the same.
	for i, mac := range []string{"52:54:00:00:00:01", "52:54:00:00:00:02"} {
		if code, _ := a.lookup(mac, attacker); code != 404 {
			t.Fatalf("guess %d: %d, want 404", i+1, code)
		}
	}
	for i := range 3 {
		w := a.do("GET", "/v1/lookup?addresses=52:54:00:00:00:03", attacker, "")
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("guess %d past the burst: %d, want 429: %s", i+3, w.Code, w.Body)
		}
		if got := w.Header().Get("Retry-After"); got != "1" {
			t.Errorf("Retry-After = %q, want 1", got)
		}
		if !strings.Contains(w.Body.String(), "error_message") {
			t.Errorf("429 not in Ironic's error format: %s", w.Body)
		}
	}
	// continue_inspection draws on the same bucket.
	w := a.do("POST", "/v1/continue_inspection", attacker, `{"inventory":{"interfaces":[]}}`)
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("continue_inspection from a limited address: %d, want 429", w.Code)
	}
	if code, _ := a.lookup("52:54:00:00:00:03", other); code != 404 {
		t.Errorf("another address: %d, want 404 (its own bucket)", code)
	}
	for i := range 10 {
		if code, _ := a.lookup("52:54:00:00:00:04", "127.0.0.1:5000"); code != 404 {
			t.Fatalf("loopback request %d: %d, want 404 (loopback is not limited)", i+1, code)
		}
	}
	a.clock.add(time.Second)
	if code, _ := a.lookup("52:54:00:00:00:05", attacker); code != 404 {
		t.Errorf("after a second: %d, want 404 (one token refilled)", code)
	}
	if w := a.do("POST", "/v1/continue_inspection", "192.0.2.12:40000", `{"inventory":{"interfaces":[]}}`); w.Code != 404 {
		t.Errorf("continue_inspection matching no node: %d, want 404", w.Code)
	}
	logs := a.logs.String()
	if n := strings.Count(logs, "rate limit reached"); n != 1 {
		t.Errorf("the refusals were logged %d times, want once until the address is allowed again:\n%s", n, logs)
	}
	if !strings.Contains(logs, "limit reached; refusing this source until its rate drops\" endpoint=lookup source=192.0.2.10") ||
		!strings.Contains(logs, "endpoint=continue_inspection source=192.0.2.12") {
		t.Errorf("agent calls are not logged with their source address:\n%s", logs)
	}
}

// TestLookupTokenOnce: the first lookup gets the token, the next ones
// "******" as in Ironic, the stored token is not replaced, and the history
// names the address that claimed it.
func TestLookupTokenOnce(t *testing.T) {
	a := newAgentAPI(t, 0, 1)
	const uuid = "4b0c9a50-1d2e-4f3a-9b8c-7d6e5f4a3b21"
	a.node(t, uuid, "52:54:00:aa:00:01", proto.StateCleanWait, proto.Dict{}, "")
	code, first := a.lookup("52:54:00:aa:00:01", "192.0.2.20:1000")
	if code != 200 || len(first.Config.AgentToken) < 16 || first.Config.AgentToken == proto.MaskedToken {
		t.Fatalf("first lookup: %d, token %q", code, first.Config.AgentToken)
	}
	code, second := a.lookup("52:54:00:aa:00:01", "192.0.2.21:1000")
	if code != 200 || second.Config.AgentToken != proto.MaskedToken {
		t.Errorf("second lookup: %d, token %q, want %q", code, second.Config.AgentToken, proto.MaskedToken)
	}
	if second.Node.DriverInternalInfo[proto.InfoAgentToken] != proto.MaskedToken {
		t.Errorf("second lookup shows the stored token: %v", second.Node.DriverInternalInfo)
	}
	n, _ := a.st.GetNode(context.Background(), uuid)
	if n.DriverInternalInfo[proto.InfoAgentToken] != first.Config.AgentToken {
		t.Errorf("stored token %v, want the one the first lookup issued", n.DriverInternalInfo[proto.InfoAgentToken])
	}
	hist, err := a.st.ListHistory(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	var claims []string
	for _, ev := range hist {
		if strings.Contains(ev.Event, "Agent token issued") {
			claims = append(claims, ev.Event)
		}
	}
	if len(claims) != 1 || !strings.Contains(claims[0], "192.0.2.20") {
		t.Errorf("history of token claims = %q, want one naming 192.0.2.20", claims)
	}
}

// TestLookupNeverIssuesATokenTheMediaCarries: a node whose boot media carry
// the token (flagged pre-generated, or booting from an interface that puts
// the token on its media, before the conductor stored it) gets "******"
// from every lookup, and nothing is stored.
func TestLookupNeverIssuesATokenTheMediaCarries(t *testing.T) {
	a := newAgentAPI(t, 0, 1)
	for _, tc := range []struct {
		name, uuid, mac, boot string
		dii                   proto.Dict
	}{
		{"pre-generated flag, token stored", "5c1d0b61-2e3f-4a5b-8c9d-0e1f2a3b4c51", "52:54:00:bb:00:01", "",
			proto.Dict{proto.InfoAgentToken: "media-token-1234567890", proto.InfoAgentTokenPregen: true}},
		{"pre-generated flag, token not yet stored", "5c1d0b61-2e3f-4a5b-8c9d-0e1f2a3b4c52", "52:54:00:bb:00:02", "",
			proto.Dict{proto.InfoAgentTokenPregen: true}},
		{"boot interface carries the token", "5c1d0b61-2e3f-4a5b-8c9d-0e1f2a3b4c53", "52:54:00:bb:00:03", "api-test-media-token",
			proto.Dict{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.node(t, tc.uuid, tc.mac, proto.StateDeployWait, tc.dii, tc.boot)
			for i := range 2 {
				code, doc := a.lookup(tc.mac, "192.0.2.30:1000")
				if code != 200 || doc.Config.AgentToken != proto.MaskedToken {
					t.Errorf("lookup %d: %d, token %q, want %q", i+1, code, doc.Config.AgentToken, proto.MaskedToken)
				}
			}
			n, _ := a.st.GetNode(context.Background(), tc.uuid)
			if got, want := n.DriverInternalInfo[proto.InfoAgentToken], tc.dii[proto.InfoAgentToken]; got != want {
				t.Errorf("stored token %v, want %v", got, want)
			}
		})
	}
}
