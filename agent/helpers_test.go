package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// fakeClock is a manual clock: timers fire only when Advance passes them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	asked  []time.Duration // every duration passed to After, in order
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	f.asked = append(f.asked, d)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.timers = append(f.timers, fakeTimer{f.now.Add(d), ch})
	return ch
}

// Advance moves time forward and fires due timers.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.timers[:0]
	for _, t := range f.timers {
		if !t.at.After(f.now) {
			t.ch <- f.now
		} else {
			kept = append(kept, t)
		}
	}
	f.timers = kept
}

// waitAsked waits (in real time) until After has been called n times and
// returns the n-th duration.
func (f *fakeClock) waitAsked(t *testing.T, n int) time.Duration {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		if len(f.asked) >= n {
			d := f.asked[n-1]
			f.mu.Unlock()
			return d
		}
		f.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("clock.After was not called %d times", n)
	return 0
}

// fireNext advances to the earliest pending timer.
func (f *fakeClock) fireNext(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	if len(f.timers) == 0 {
		f.mu.Unlock()
		t.Fatal("no pending timer")
	}
	next := f.timers[0].at
	for _, tm := range f.timers {
		if tm.at.Before(next) {
			next = tm.at
		}
	}
	d := next.Sub(f.now)
	f.mu.Unlock()
	f.Advance(d)
}

// heartbeatRec is one heartbeat the test controller received.
type heartbeatRec struct {
	UUID    string
	Version string
	Body    proto.HeartbeatRequest
	At      time.Time
}

// testController is a minimal Ironic: GET /, GET /v1/lookup, POST /v1/heartbeat.
type testController struct {
	t     *testing.T
	clock Clock
	srv   *httptest.Server

	mu sync.Mutex
	// lookups answers lookup n with lookups[min(n, len-1)]: an HTTP status
	// and, for 200, the response.
	lookups     []lookupAnswer
	nLookups    int
	lookupQuery []string
	lookupVer   []string
	heartbeats  []heartbeatRec
	hbStatus    []int // status for heartbeat n (202 when out of range)
	hbCh        chan heartbeatRec
	maxVersion  string
	inspections []proto.InspectionRequest
	inspectVer  []string
}

type lookupAnswer struct {
	status int
	resp   proto.LookupResponse
}

func newTestController(t *testing.T, clock Clock) *testController {
	c := &testController{t: t, clock: clock, hbCh: make(chan heartbeatRec, 100), maxVersion: "1.82"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		v := c.maxVersion
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"name":"OpenStack Ironic API","default_version":{"id":"v1","status":"CURRENT","min_version":"1.1","version":"`+v+`"}}`)
	})
	mux.HandleFunc("GET /v1/lookup", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		n := c.nLookups
		c.nLookups++
		c.lookupQuery = append(c.lookupQuery, r.URL.RawQuery)
		c.lookupVer = append(c.lookupVer, r.Header.Get(microversionHeader))
		a := lookupAnswer{status: 404}
		if len(c.lookups) > 0 {
			a = c.lookups[min(n, len(c.lookups)-1)]
		}
		c.mu.Unlock()
		if a.status != 200 {
			w.WriteHeader(a.status)
			io.WriteString(w, `{"error_message":"{\"faultstring\":\"no\"}"}`)
			return
		}
		json.NewEncoder(w).Encode(a.resp)
	})
	mux.HandleFunc("POST /v1/heartbeat/{uuid}", func(w http.ResponseWriter, r *http.Request) {
		var body proto.HeartbeatRequest
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			w.WriteHeader(400)
			return
		}
		rec := heartbeatRec{UUID: r.PathValue("uuid"), Version: r.Header.Get(microversionHeader), Body: body, At: c.clock.Now()}
		c.mu.Lock()
		n := len(c.heartbeats)
		c.heartbeats = append(c.heartbeats, rec)
		st := 202
		if n < len(c.hbStatus) {
			st = c.hbStatus[n]
		}
		c.mu.Unlock()
		c.hbCh <- rec
		w.WriteHeader(st)
	})
	mux.HandleFunc("POST /v1/continue_inspection", func(w http.ResponseWriter, r *http.Request) {
		var body proto.InspectionRequest
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			w.WriteHeader(400)
			return
		}
		c.mu.Lock()
		c.inspections = append(c.inspections, body)
		c.inspectVer = append(c.inspectVer, r.Header.Get(microversionHeader))
		c.mu.Unlock()
		w.WriteHeader(202)
		io.WriteString(w, `{"uuid":"`+testNode+`"}`)
	})
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	return c
}

func (c *testController) nextHeartbeat(t *testing.T) heartbeatRec {
	t.Helper()
	select {
	case h := <-c.hbCh:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat")
	}
	return heartbeatRec{}
}

func (c *testController) noHeartbeat(t *testing.T, wait time.Duration) {
	t.Helper()
	select {
	case h := <-c.hbCh:
		t.Fatalf("unexpected heartbeat %+v", h)
	case <-time.After(wait):
	}
}

const (
	testToken  = "tok-0123456789abcdefghijklmnopqrstuvwxyzABCD" // 43+ chars like secrets.token_urlsafe()
	testToken2 = "second-0123456789abcdefghijklmnopqrstuvwxyz"
	testNode   = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
)

func okLookup(token string, hb int) lookupAnswer {
	return lookupAnswer{status: 200, resp: proto.LookupResponse{
		Node:   proto.LookupNode{UUID: testNode, Properties: map[string]any{}, InstanceInfo: map[string]any{}, DriverInternalInfo: map[string]any{}},
		Config: proto.LookupConfig{HeartbeatTimeout: hb, AgentToken: token, AgentTokenRequired: true},
	}}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// newTestAgent builds an agent aimed at ctl (may be nil) with a fixed seed.
func newTestAgent(t *testing.T, ctl *testController, clock Clock, mod func(*Config, *Deps)) *Agent {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ListenHost, cfg.ListenPort = "127.0.0.1", 0
	cfg.PluginDir = ""
	cfg.AutoTLS = false
	cfg.BootIF = "52:54:00:12:34:56"
	if ctl != nil {
		cfg.APIURL = ctl.srv.URL
	}
	ring := NewRing(1 << 20)
	deps := Deps{
		Clock: clock, Ring: ring,
		Log:  slog.New(slog.NewTextHandler(ring, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Rand: rand.New(rand.NewPCG(1, 2)),
		MACs: func() []string { return []string{"52:54:00:aa:bb:cc"} },
	}
	if mod != nil {
		mod(&cfg, &deps)
	}
	a, err := New(context.Background(), cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustContain(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Fatalf("%q does not contain %q", s, sub)
		}
	}
}
