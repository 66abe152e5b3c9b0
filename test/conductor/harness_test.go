// Package conductor_test drives Kiln's conductor through its real API over
// HTTP, with scripted agents (test/fakeagent) standing in for the ramdisk on
// machines whose power and boot are simulated by a test hardware type.
package conductor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/conductor"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/fakeagent"
)

// machine is a simulated server: powering it on with the agent ramdisk
// prepared boots a scripted agent; powering it off kills the agent.
type machine struct {
	mu       sync.Mutex
	ramdisk  bool
	on       bool
	agent    *fakeagent.Agent
	agents   []*fakeagent.Agent
	cfg      fakeagent.Config
	noBoot   bool   // the ramdisk never comes up (for callback timeouts)
	token    string // agent token the boot media carry (virtual media)
	bootedAt []time.Time
}

// lab maps node UUIDs to machines; the scripted interfaces look them up.
var lab = struct {
	sync.Mutex
	m   map[string]*machine
	url string
}{m: map[string]*machine{}}

func machineOf(n *proto.Node) *machine {
	lab.Lock()
	defer lab.Unlock()
	return lab.m[n.UUID]
}

func (m *machine) boot() {
	if m.agent != nil {
		go m.agent.Stop()
		m.agent = nil
	}
	if !m.ramdisk || m.noBoot {
		return
	}
	cfg := m.cfg
	cfg.Token = m.token
	a, err := fakeagent.Start(context.Background(), cfg)
	if err != nil {
		panic(err)
	}
	m.agent = a
	m.agents = append(m.agents, a)
	m.bootedAt = append(m.bootedAt, time.Now())
}

type scriptedPower struct{}

func (scriptedPower) Validate(ctx context.Context, n *proto.Node) error {
	if n.DriverInfo["scripted_password"] == "wrong" {
		return fmt.Errorf("authentication failed for BMC %v", n.DriverInfo["scripted_address"])
	}
	return nil
}

func (scriptedPower) GetPowerState(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
	m := machineOf(n)
	if m == nil {
		return proto.PowerOff, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.on {
		return proto.PowerOn, nil
	}
	return proto.PowerOff, nil
}

func (scriptedPower) SetPowerState(ctx context.Context, n *proto.Node, target proto.PowerState, _ time.Duration) error {
	m := machineOf(n)
	if m == nil {
		return fmt.Errorf("no machine for node %s", n.UUID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch target {
	case proto.PowerOn, proto.PowerRebooting, proto.PowerSoftReboot:
		m.on = true
		m.boot()
	default:
		m.on = false
		if m.agent != nil {
			go m.agent.Stop()
			m.agent = nil
		}
	}
	return nil
}

type scriptedBoot struct{}

// scriptedVMedia boots the agent from "virtual media" whose kernel command
// line carries a pre-generated agent token.
type scriptedVMedia struct{ scriptedBoot }

func (scriptedVMedia) CarriesAgentToken(*proto.Node) bool { return true }

func (v scriptedVMedia) PrepareRamdisk(ctx context.Context, n *proto.Node, p driver.RamdiskParams) error {
	if p.AgentToken == "" {
		return fmt.Errorf("virtual media without an agent token")
	}
	if m := machineOf(n); m != nil {
		m.mu.Lock()
		m.token = p.AgentToken
		m.mu.Unlock()
	}
	return v.scriptedBoot.PrepareRamdisk(ctx, n, p)
}

func (scriptedBoot) Validate(ctx context.Context, n *proto.Node) error { return nil }
func (scriptedBoot) PrepareRamdisk(ctx context.Context, n *proto.Node, p driver.RamdiskParams) error {
	m := machineOf(n)
	if m == nil {
		return fmt.Errorf("no machine for node %s", n.UUID)
	}
	if p.KernelArgs["ipa-api-url"] == "" {
		return fmt.Errorf("no ipa-api-url in kernel arguments %v", p.KernelArgs)
	}
	m.mu.Lock()
	m.ramdisk = true
	m.mu.Unlock()
	return nil
}
func (scriptedBoot) CleanUpRamdisk(ctx context.Context, n *proto.Node) error {
	if m := machineOf(n); m != nil {
		m.mu.Lock()
		m.ramdisk = false
		m.mu.Unlock()
	}
	return nil
}
func (scriptedBoot) PrepareInstance(ctx context.Context, n *proto.Node) error {
	return scriptedBoot{}.CleanUpRamdisk(ctx, n)
}

func init() {
	driver.RegisterPower("scripted", scriptedPower{})
	driver.RegisterBoot("scripted", scriptedBoot{})
	driver.RegisterBoot("scripted-vmedia", scriptedVMedia{})
	driver.Register(driver.HardwareType{
		Name: "scripted-hardware",
		Supported: map[string][]string{
			"power": {"scripted"}, "boot": {"scripted", "scripted-vmedia"}, "management": {"fake"},
			"deploy": {"direct", "custom-agent", "fake"}, "inspect": {"agent", "fake"},
			"network": {"noop"}, "storage": {"noop"}, "bios": {"no-bios", "fake"}, "console": {"no-console"},
			"firmware": {"no-firmware"}, "raid": {"no-raid"}, "rescue": {"no-rescue"}, "vendor": {"no-vendor"},
		},
		BootDevices: []string{"pxe", "disk"},
	})
}

// controller is Kiln's API and conductor in this process on a SQLite file,
// served over real HTTP.
type controller struct {
	t    testing.TB
	URL  string
	st   store.Store
	cond *conductor.Conductor
}

type controllerOpts struct {
	callbackTimeout       time.Duration
	agentHeartbeatTimeout time.Duration
	powerSync             time.Duration     // 0: off
	logTo                 io.Writer         // the controller's and agent client's log (text, debug level); nil: discarded
	observe               events.Observer   // nil: none; sees every node write the API and conductor make
	rules                 *inspectrules.Set // inspection rules; nil: none
}

func startController(t testing.TB, o controllerOpts) *controller {
	t.Helper()
	if o.powerSync == 0 {
		o.powerSync = -1
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if o.logTo != nil {
		log = slog.New(slog.NewTextHandler(o.logTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// Node writes go through the watched store, as in kiln serve, so that
	// GET /v1/events streams them.
	bus := events.NewBus()
	observers := []events.Observer{events.PublishTo(bus)}
	if o.observe != nil {
		observers = append(observers, o.observe)
	}
	wst := events.Watch(st, observers...)
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	cond := conductor.New(conductor.Config{
		Store: wst, Agent: agentclient.New(agentclient.Options{Timeout: 10 * time.Second, RetryDelay: 100 * time.Millisecond, Logger: log}),
		Name: "test-conductor", APIURL: srv.URL, Log: log, ScanInterval: 200 * time.Millisecond,
		CallbackTimeout: o.callbackTimeout, AgentHeartbeatTimeout: o.agentHeartbeatTimeout, PowerSyncInterval: o.powerSync,
		InspectionRules: o.rules,
	})
	handler = api.New(api.Config{Store: wst, Conductor: "test-conductor", Logger: log, Notify: cond.Notify, NotifyAgent: cond.NotifyAgent, AgentHeartbeated: cond.AgentHeartbeated, AgentHeartbeatTimeout: o.agentHeartbeatTimeout, Events: bus})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cond.Run(ctx)
	}()
	lab.Lock()
	lab.url = srv.URL
	lab.Unlock()
	t.Cleanup(func() {
		cancel()
		<-done
		bus.Close()
		srv.Close()
		st.Close()
	})
	return &controller{t: t, URL: srv.URL, st: st, cond: cond}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// call sends one API request at microversion 1.95 and decodes the answer.
func (c *controller) call(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, c.URL+path, r)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// enroll creates a scripted machine and its node, with one port for mac.
func (c *controller) enroll(name, mac string, fields map[string]any, m *machine) string {
	c.t.Helper()
	body := map[string]any{"driver": "scripted-hardware", "name": name, "deploy_interface": "direct", "inspect_interface": "agent",
		"driver_info": map[string]any{"scripted_address": "10.0.0.1", "scripted_password": "pw"}}
	for k, v := range fields {
		body[k] = v
	}
	code, n := c.call("POST", "/v1/nodes", body)
	if code != 201 {
		c.t.Fatalf("create node: %d %v", code, n)
	}
	uuid := n["uuid"].(string)
	if code, p := c.call("POST", "/v1/ports", map[string]any{"node_uuid": uuid, "address": mac}); code != 201 {
		c.t.Fatalf("create port: %d %v", code, p)
	}
	if m.cfg.ControllerURL == "" {
		m.cfg.ControllerURL = c.URL
	}
	m.cfg.MACs = []string{mac}
	if m.cfg.HeartbeatInterval == 0 {
		m.cfg.HeartbeatInterval = 100 * time.Millisecond
	}
	lab.Lock()
	lab.m[uuid] = m
	lab.Unlock()
	c.t.Cleanup(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, a := range m.agents {
			a.Stop()
		}
	})
	return uuid
}

// provision sends a provision verb and expects 202.
// A 409 (node locked while the conductor acts on a heartbeat) is retried, as
// Ironic's clients do.
func (c *controller) provision(uuid string, body map[string]any) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, out := c.call("PUT", "/v1/nodes/"+uuid+"/states/provision", body)
		if code == 202 {
			return
		}
		if code != 409 || time.Now().After(deadline) {
			c.t.Fatalf("provision %v: %d %v", body, code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitState polls until the node is in want (and not reserved), failing on a
// different stable or failed state.
func (c *controller) waitState(uuid string, want proto.ProvisionState, timeout time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, n := c.call("GET", "/v1/nodes/"+uuid, nil)
		st := proto.ProvisionState(fmt.Sprint(n["provision_state"]))
		if st == want && n["reservation"] == nil {
			return n
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %s did not reach %q within %s: state %q target %v last_error %v", uuid, want, timeout, st, n["target_provision_state"], n["last_error"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
