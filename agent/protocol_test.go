package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

func TestLookupBackoffAndConflictPauses(t *testing.T) {
	clock := newFakeClock()
	ctl := newTestController(t, clock)
	ctl.lookups = []lookupAnswer{{status: 404}, {status: 404}, {status: 404}, {status: 409}, {status: 409}, {status: 409}, {status: 409}, okLookup(testToken, 60)}
	a := newTestAgent(t, ctl, clock, nil)
	done := make(chan error, 1)
	go func() { done <- a.Lookup(context.Background(), "") }()

	// three 404s: randomized exponential backoff, 1 s ≤ wait ≤ 2^n s.
	for n := 1; n <= 3; n++ {
		d := clock.waitAsked(t, n)
		if d < time.Second || d > time.Duration(1<<n)*time.Second {
			t.Fatalf("backoff %d = %s, want in [1s, %ds]", n, d, 1<<n)
		}
		clock.fireNext(t)
	}
	// 409s: 5, 10, 30, 30 s.
	for i, want := range []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second, 30 * time.Second} {
		if d := clock.waitAsked(t, 4+i); d != want {
			t.Fatalf("conflict pause %d = %s, want %s", i+1, d, want)
		}
		clock.fireNext(t)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a.NodeUUID() != testNode || a.Token() != testToken {
		t.Fatalf("node %q token %q", a.NodeUUID(), a.Token())
	}
	q, _ := url.ParseQuery(ctl.lookupQuery[0])
	if q.Get("addresses") != "52:54:00:12:34:56,52:54:00:aa:bb:cc" {
		t.Fatalf("lookup addresses = %q (BOOTIF first, then interfaces)", q.Get("addresses"))
	}
	if ctl.lookupVer[0] != "1.62" {
		t.Fatalf("lookup microversion %q, want min(1.82, 1.62)", ctl.lookupVer[0])
	}
}

func TestLookupBackoffCapsAt60s(t *testing.T) {
	r := newTestAgent(t, nil, newFakeClock(), nil).rnd
	for n := 1; n < 50; n++ {
		d := LookupBackoff(r, n)
		if d < time.Second || d > 60*time.Second {
			t.Fatalf("LookupBackoff(%d) = %s", n, d)
		}
	}
}

func TestLookupTimeout(t *testing.T) {
	clock := newFakeClock()
	ctl := newTestController(t, clock)
	a := newTestAgent(t, ctl, clock, func(c *Config, _ *Deps) { c.LookupTimeout = 20 * time.Second; c.NodeUUID = testNode })
	done := make(chan error, 1)
	start := clock.Now()
	go func() { done <- a.Lookup(context.Background(), testNode) }()
	for {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "gave up after 20s") {
				t.Fatalf("want timeout error, got %v", err)
			}
			if el := clock.Now().Sub(start); el > 20*time.Second {
				t.Fatalf("lookup waited %s past its 20s budget", el)
			}
			q, _ := url.ParseQuery(ctl.lookupQuery[0])
			if q.Get("node_uuid") != testNode {
				t.Fatalf("node_uuid not sent: %v", q)
			}
			return
		case <-time.After(5 * time.Millisecond):
			clock.mu.Lock()
			pending := len(clock.timers)
			clock.mu.Unlock()
			if pending > 0 {
				clock.fireNext(t)
			}
		}
	}
}

func TestLookupControllerDown(t *testing.T) {
	clock := newFakeClock()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	a := newTestAgent(t, nil, clock, func(c *Config, _ *Deps) { c.APIURL = "http://" + addr; c.LookupTimeout = 3 * time.Second })
	done := make(chan error, 1)
	go func() { done <- a.Lookup(context.Background(), "") }()
	for {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("want connection refused, got %v", err)
			}
			return
		case <-time.After(5 * time.Millisecond):
			clock.mu.Lock()
			pending := len(clock.timers)
			clock.mu.Unlock()
			if pending > 0 {
				clock.fireNext(t)
			}
		}
	}
}

func TestTokenHandling(t *testing.T) {
	for _, c := range []struct {
		name, cmdline, lookup, want string
	}{
		{"first lookup issues it", "", testToken, testToken},
		{"masked keeps cmdline token", testToken, proto.MaskedToken, testToken},
		{"masked without any token", "", proto.MaskedToken, ""},
		{"new token replaces", testToken, testToken2, testToken2},
		{"short token ignored", testToken, "short", testToken},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			ctl := newTestController(t, clock)
			ctl.lookups = []lookupAnswer{okLookup(c.lookup, 60)}
			a := newTestAgent(t, ctl, clock, func(cfg *Config, _ *Deps) { cfg.AgentToken = c.cmdline })
			if err := a.Lookup(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			if a.Token() != c.want {
				t.Fatalf("token = %q, want %q", a.Token(), c.want)
			}
			if err := a.prepareCallback(context.Background(), 9999); err != nil {
				t.Fatal(err)
			}
			if err := a.Heartbeat(context.Background()); err != nil {
				t.Fatal(err)
			}
			hb := ctl.nextHeartbeat(t)
			if hb.Body.AgentToken != c.want || hb.UUID != testNode || hb.Version != "1.68" || hb.Body.AgentVersion != Version {
				t.Fatalf("heartbeat %+v", hb)
			}
		})
	}
}

// quickStep is a manager with one clean step that finishes at once (or waits on gate).
func quickStep(gate chan struct{}) *steps.Manager {
	return steps.MustManager("test_manager", "7", steps.SupportMainline, steps.Def{Kind: proto.StepClean,
		Step: proto.Step{Step: "quick", Interface: "deploy"}, Run: func(ctx context.Context, c steps.Call) (any, error) {
			if gate != nil {
				<-gate
			}
			return map[string]any{"ok": true}, nil
		}})
}

// TestHeartbeatTiming follows IPA's cadence on the fake clock, and the
// heartbeat after a finished step: at once when the lookup answer says the
// controller is Kiln, else no sooner than ForcedHeartbeatGap after the
// previous heartbeat (Ironic's conductor may still hold the node's lock).
func TestHeartbeatTiming(t *testing.T) {
	for _, c := range []struct {
		name string
		kiln bool
	}{{"kiln", true}, {"ironic", false}} {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			ctl := newTestController(t, clock)
			lk := okLookup(testToken, 100)
			lk.resp.Config.ImmediateHeartbeat = c.kiln
			ctl.lookups = []lookupAnswer{lk}
			ctl.hbStatus = []int{202, 409, 202, 202}
			a := newTestAgent(t, ctl, clock, func(_ *Config, d *Deps) { d.Managers = []*steps.Manager{quickStep(nil)} })
			if err := a.Lookup(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			if err := a.prepareCallback(context.Background(), 9999); err != nil {
				t.Fatal(err)
			}
			// Counted before the loop starts: nothing else calls After, so
			// the loop's calls are n+1, n+2, … whatever the scheduling.
			clock.mu.Lock()
			n := len(clock.asked)
			clock.mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go a.HeartbeatLoop(ctx)

			// 1. immediately, no clock movement.
			h1 := ctl.nextHeartbeat(t)
			if !h1.At.Equal(clock.Now()) {
				t.Fatal("first heartbeat not immediate")
			}
			// 2. after heartbeat_timeout × U(0.3, 0.6) = 30–60 s.
			d := clock.waitAsked(t, n+1)
			if d < 30*time.Second || d >= 60*time.Second {
				t.Fatalf("interval %s not in [30s, 60s)", d)
			}
			ctl.noHeartbeat(t, 20*time.Millisecond)
			clock.Advance(d)
			ctl.nextHeartbeat(t) // answered 409
			// 3. after an error: 5–10 s.
			d = clock.waitAsked(t, n+2)
			if d < 5*time.Second || d >= 10*time.Second {
				t.Fatalf("error retry %s not in [5s, 10s)", d)
			}
			clock.Advance(d)
			ctl.nextHeartbeat(t)
			clock.waitAsked(t, n+3)

			// 4. a step finishes with no clock movement since the heartbeat.
			last := clock.Now()
			runQuick(t, a)
			if c.kiln {
				if h := ctl.nextHeartbeat(t); !h.At.Equal(last) {
					t.Fatalf("heartbeat after command at %s, want immediately (%s)", h.At, last)
				}
				return
			}
			if gap := clock.waitAsked(t, n+4); gap != ForcedHeartbeatGap {
				t.Fatalf("forced heartbeat waits %s, want %s after the previous one", gap, ForcedHeartbeatGap)
			}
			ctl.noHeartbeat(t, 20*time.Millisecond)
			clock.Advance(ForcedHeartbeatGap)
			if h := ctl.nextHeartbeat(t); !h.At.Equal(last.Add(ForcedHeartbeatGap)) {
				t.Fatalf("forced heartbeat at %s, want %s", h.At, last.Add(ForcedHeartbeatGap))
			}
			// 5. a step that finishes more than the gap after the previous
			// heartbeat (and before the next is due) is reported at once.
			d = clock.waitAsked(t, n+5)
			clock.Advance(20 * time.Second)
			if d <= 20*time.Second {
				t.Fatalf("interval %s too short for this test", d)
			}
			now := clock.Now()
			runQuick(t, a)
			if h := ctl.nextHeartbeat(t); !h.At.Equal(now) {
				t.Fatalf("heartbeat %s after the gap: at %s, want at once (%s)", now.Sub(last), h.At, now)
			}
		})
	}
}

// runQuick runs the quick clean step through the agent and waits for it.
func runQuick(t *testing.T, a *Agent) {
	t.Helper()
	params, _ := json.Marshal(map[string]any{"step": map[string]any{"step": "quick", "interface": "deploy"}, "node": map[string]any{}, "ports": []any{}})
	cmd, err := a.Execute(proto.CmdExecuteCleanStep, params)
	if err != nil {
		t.Fatal(err)
	}
	<-cmd.Done()
	if r := cmd.Result(); r.CommandStatus != proto.CommandSucceeded {
		t.Fatalf("command %+v", r)
	}
}

func TestCallbackURL(t *testing.T) {
	for _, c := range []struct {
		name, api, advertise string
		port                 int
		want                 string
	}{
		{"ipv4 from route", "http://127.0.0.1:6385", "", 9999, "http://127.0.0.1:9999"},
		{"ipv6 in brackets", "http://[::1]:6385", "", 9999, "http://[::1]:9999"},
		{"advertise host wins", "http://127.0.0.1:6385", "10.1.2.3", 8999, "http://10.1.2.3:8999"},
		{"advertised ipv6", "http://127.0.0.1:6385", "fd00::5", 9999, "http://[fd00::5]:9999"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.api, "::1") {
				if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
					t.Skipf("no IPv6 loopback: %v", err)
				} else {
					ln.Close()
				}
			}
			a := newTestAgent(t, nil, newFakeClock(), func(cfg *Config, _ *Deps) { cfg.APIURL = c.api; cfg.AdvertiseHost = c.advertise })
			if err := a.prepareCallback(context.Background(), c.port); err != nil {
				t.Fatal(err)
			}
			if a.CallbackURL() != c.want {
				t.Fatalf("callback_url %q, want %q", a.CallbackURL(), c.want)
			}
		})
	}
}

// TestRunAutoTLS runs the whole agent against a test controller with auto-TLS:
// the heartbeat carries agent_verify_ca and an https callback_url, and the
// controller reaches the agent over HTTPS trusting exactly that PEM.
func TestRunAutoTLS(t *testing.T) {
	ctl := newTestController(t, RealClock)
	ctl.lookups = []lookupAnswer{okLookup(testToken, 300)}
	a := newTestAgent(t, ctl, RealClock, func(c *Config, _ *Deps) { c.AutoTLS = true })
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runErr; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
	}()
	hb := ctl.nextHeartbeat(t)
	if !strings.HasPrefix(hb.Body.CallbackURL, "https://127.0.0.1:") || !strings.Contains(hb.Body.AgentVerifyCA, "BEGIN CERTIFICATE") {
		t.Fatalf("heartbeat %+v", hb.Body)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(hb.Body.AgentVerifyCA)) {
		t.Fatal("agent_verify_ca is not PEM")
	}
	verified := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	resp, err := verified.Get(hb.Body.CallbackURL + "/v1/status")
	if err != nil {
		t.Fatalf("controller cannot reach the agent over verified HTTPS: %v", err)
	}
	var st proto.AgentStatus
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != 200 || st.Version != Version || st.StartedAt == 0 {
		t.Fatalf("status %d %+v", resp.StatusCode, st)
	}
	resp, err = verified.Get(hb.Body.CallbackURL + "/v1/commands/?agent_token=" + testToken)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("commands over TLS: %v %v", resp, err)
	}
	resp.Body.Close()
	// Without the PEM the certificate is not trusted.
	if _, err := (&http.Client{Timeout: 5 * time.Second}).Get(hb.Body.CallbackURL + "/v1/status"); err == nil {
		t.Fatal("self-signed certificate trusted without agent_verify_ca")
	}
}

func TestRunPlainHTTPOnOldController(t *testing.T) {
	ctl := newTestController(t, RealClock)
	ctl.maxVersion = "1.60"
	ctl.lookups = []lookupAnswer{okLookup(testToken, 300)}
	a := newTestAgent(t, ctl, RealClock, func(c *Config, _ *Deps) { c.AutoTLS = true })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx)
	hb := ctl.nextHeartbeat(t)
	if !strings.HasPrefix(hb.Body.CallbackURL, "http://") || hb.Body.AgentVerifyCA != "" || hb.Body.AgentToken != "" || hb.Version != "1.60" {
		t.Fatalf("heartbeat to a 1.60 controller: %+v (µv %s)", hb.Body, hb.Version)
	}
	if ctl.lookupVer[0] != "1.60" {
		t.Fatalf("lookup µv %s", ctl.lookupVer[0])
	}
}

// TestRunInspectionThenLookup: with an inspection callback the agent posts the
// inventory first (no microversion header), then looks up with the node UUID
// the controller returned.
func TestRunInspectionThenLookup(t *testing.T) {
	ctl := newTestController(t, RealClock)
	ctl.lookups = []lookupAnswer{okLookup(testToken, 300)}
	a := newTestAgent(t, ctl, RealClock, func(c *Config, d *Deps) {
		c.InspectionCallbackURL = ctl.srv.URL + "/v1/continue_inspection"
		c.InspectionCollectors = []string{"default", "logs"}
		d.Inventory = func(context.Context) (any, error) {
			return map[string]any{"cpu": map[string]any{"count": 2}, "bmc_address": "0.0.0.0"}, nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx)
	ctl.nextHeartbeat(t)
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if len(ctl.inspections) != 1 || ctl.inspectVer[0] != "" {
		t.Fatalf("inspections %+v (µv %q)", ctl.inspections, ctl.inspectVer)
	}
	in := ctl.inspections[0]
	if string(in.Inventory) != `{"bmc_address":"0.0.0.0","cpu":{"count":2}}` || in.Error != nil || in.BootInterface != "52:54:00:12:34:56" ||
		len(in.Configuration.Collectors) != 2 || len(in.Configuration.Managers) == 0 {
		t.Fatalf("inspection body %+v", in)
	}
	q, _ := url.ParseQuery(ctl.lookupQuery[0])
	if q.Get("node_uuid") != testNode {
		t.Fatalf("lookup after inspection lacks node_uuid: %v", q)
	}
}
