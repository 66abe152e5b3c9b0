package fakeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/proto"
)

const (
	nodeUUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	theToken = "Xk3v9Q0kq2vB6p8m1sT4u7w0yZ2a5c8e1g4i7k0m3o6"
	mac      = "52:54:00:12:34:56"
)

// controller is a stand-in for the controller's agent endpoints.
type controller struct {
	t   *testing.T
	srv *httptest.Server

	mu           sync.Mutex
	lookups      []url.Values
	lookupVers   []string
	failLookups  int // answer 404 to this many lookups first
	heartbeats   []proto.HeartbeatRequest
	hbPaths      []string
	hbVers       []string
	inspections  []proto.InspectionRequest
	tokenHandout int
}

func newController(t *testing.T) *controller {
	c := &controller{t: t}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/lookup", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.lookups = append(c.lookups, r.URL.Query())
		c.lookupVers = append(c.lookupVers, r.Header.Get("X-OpenStack-Ironic-API-Version"))
		if c.failLookups > 0 {
			c.failLookups--
			http.Error(w, `{"error_message":"not found"}`, http.StatusNotFound)
			return
		}
		tok := proto.MaskedToken
		if c.tokenHandout == 0 {
			tok = theToken
		}
		c.tokenHandout++
		writeJSON(w, 200, proto.LookupResponse{
			Node:   proto.LookupNode{UUID: nodeUUID},
			Config: proto.LookupConfig{HeartbeatTimeout: 300, AgentToken: tok, AgentTokenRequired: true},
		})
	})
	mux.HandleFunc("POST /v1/heartbeat/{uuid}", func(w http.ResponseWriter, r *http.Request) {
		var hb proto.HeartbeatRequest
		if err := json.NewDecoder(r.Body).Decode(&hb); err != nil {
			t.Errorf("heartbeat body: %v", err)
		}
		c.mu.Lock()
		c.heartbeats = append(c.heartbeats, hb)
		c.hbPaths = append(c.hbPaths, r.URL.Path)
		c.hbVers = append(c.hbVers, r.Header.Get("X-OpenStack-Ironic-API-Version"))
		c.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("POST /v1/continue_inspection", func(w http.ResponseWriter, r *http.Request) {
		var ir proto.InspectionRequest
		if err := json.NewDecoder(r.Body).Decode(&ir); err != nil {
			t.Errorf("inspection body: %v", err)
		}
		if r.Header.Get("X-OpenStack-Ironic-API-Version") != "" {
			t.Errorf("inspection sent a microversion")
		}
		c.mu.Lock()
		c.inspections = append(c.inspections, ir)
		c.mu.Unlock()
		writeJSON(w, http.StatusAccepted, map[string]string{"uuid": nodeUUID})
	})
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	return c
}

func (c *controller) beats() []proto.HeartbeatRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]proto.HeartbeatRequest(nil), c.heartbeats...)
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func start(t *testing.T, cfg Config) *Agent {
	t.Helper()
	a, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return a
}

func client() *agentclient.Client {
	return agentclient.New(agentclient.Options{Timeout: 5 * time.Second, RetryDelay: 10 * time.Millisecond, PollInterval: 5 * time.Millisecond})
}

// agentOf is how the controller would address the agent after a heartbeat.
func agentOf(hb proto.HeartbeatRequest) agentclient.Agent {
	return agentclient.Agent{URL: hb.CallbackURL, Token: hb.AgentToken, VerifyCA: hb.AgentVerifyCA}
}

func TestLookupHeartbeatAndCleanStep(t *testing.T) {
	ctl := newController(t)
	release := make(chan struct{})
	a := start(t, Config{
		ControllerURL:     ctl.srv.URL,
		MACs:              []string{mac, "52:54:00:00:00:02"},
		HeartbeatInterval: time.Hour, // only the first and the forced heartbeats
		StepBehavior: func(kind, step string, args map[string]any) (any, error, time.Duration) {
			if kind != "clean" || step != "erase_devices" || args["passes"] != 2.0 {
				t.Errorf("behavior(%s, %s, %v)", kind, step, args)
			}
			<-release
			return map[string]any{"erased": true}, nil, 0
		},
	})
	eventually(t, "first heartbeat", func() bool { return a.Heartbeats() == 1 })
	ctl.mu.Lock()
	lq, lv := ctl.lookups[0], ctl.lookupVers[0]
	hb, hbPath, hbVer := ctl.heartbeats[0], ctl.hbPaths[0], ctl.hbVers[0]
	ctl.mu.Unlock()
	if lq.Get("addresses") != mac+",52:54:00:00:00:02" || lq.Has("node_uuid") || lv != "1.62" {
		t.Errorf("lookup %v (µv %s)", lq, lv)
	}
	want := proto.HeartbeatRequest{CallbackURL: a.URL(), AgentVersion: DefaultVersion, AgentToken: theToken}
	if hb != want || hbPath != "/v1/heartbeat/"+nodeUUID || hbVer != "1.68" {
		t.Errorf("heartbeat %+v to %s (µv %s), want %+v", hb, hbPath, hbVer, want)
	}
	if a.Token() != theToken || a.NodeUUID() != nodeUUID || a.LastError() != nil {
		t.Errorf("token %q node %q err %v", a.Token(), a.NodeUUID(), a.LastError())
	}

	c, ag := client(), agentOf(hb)
	ctx := t.Context()
	steps, err := c.GetSteps(ctx, ag, proto.StepClean, map[string]any{"uuid": nodeUUID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(steps.Steps, map[string][]proto.Step{ManagerClass: DefaultSteps()[proto.StepClean]}) ||
		!reflect.DeepEqual(steps.HardwareManagerVersion, HardwareManagerVersion()) {
		t.Errorf("steps %+v", steps)
	}
	if got := agentclient.LastStepStatus(a.Commands(), proto.StepClean, proto.StepCall{}); got.State != agentclient.StepFresh {
		t.Errorf("after get_clean_steps: %v", got.State)
	}

	step := proto.StepCall{Step: proto.Step{Step: "erase_devices", Interface: "deploy", Priority: 10}, Args: map[string]any{"passes": 2}}
	res, err := c.ExecuteStep(ctx, ag, proto.StepClean, step, map[string]any{"uuid": nodeUUID}, nil, steps.HardwareManagerVersion)
	if err != nil {
		t.Fatal(err)
	}
	if res.CommandName != "execute_clean_step" || res.CommandStatus != proto.CommandRunning {
		t.Errorf("result %+v", res)
	}
	// Busy while it runs.
	if err := c.Sync(ctx, ag); !errors.Is(err, agentclient.ErrBusy) {
		t.Errorf("second command while running: %v", err)
	}
	cmds, err := c.Commands(ctx, ag)
	if err != nil {
		t.Fatal(err)
	}
	if got := agentclient.LastStepStatus(cmds, proto.StepClean, step); got.State != agentclient.StepWait {
		t.Errorf("while running: %v", got.State)
	}
	close(release)
	// The finished command forces a heartbeat.
	eventually(t, "heartbeat after the step", func() bool { return a.Heartbeats() == 2 })
	cmds, err = c.Commands(ctx, ag)
	if err != nil {
		t.Fatal(err)
	}
	got := agentclient.LastStepStatus(cmds, proto.StepClean, step)
	if got.State != agentclient.StepSucceeded || !reflect.DeepEqual(got.Result.Result, map[string]any{"erased": true}) {
		t.Fatalf("after the step: %+v", got)
	}
	// The echo is the step as sent, args included.
	if got.Result.Step.Priority != 10 || got.Result.Step.Args["passes"] != 2.0 {
		t.Errorf("echo %+v", got.Result.Step)
	}
	if ex := a.Executed(proto.StepClean); !reflect.DeepEqual(ex, []string{"erase_devices"}) {
		t.Errorf("executed %v", ex)
	}

	// The record: every /v1/commands call carried the token; names keep the prefix.
	var names []string
	for _, r := range a.Requests() {
		if strings.HasPrefix(r.Path, "/v1/commands") && r.Token != theToken {
			t.Errorf("%s %s without the token", r.Method, r.Path)
		}
		if r.Method == "POST" {
			names = append(names, r.Name)
		}
	}
	wantNames := []string{"clean.get_clean_steps", "clean.execute_clean_step", "standby.sync"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("POSTs %v, want %v", names, wantNames)
	}
	reqs := a.Requests()
	if r := reqs[1]; r.Status != 200 || r.Query.Get("wait") != "false" || r.Params["clean_version"] == nil {
		t.Errorf("execute request %+v", r)
	}
	if r := reqs[2]; r.Status != http.StatusConflict {
		t.Errorf("busy request answered %d", r.Status)
	}
}

// rawCall sends one request to the agent API and returns status and body.
func rawCall(t *testing.T, method, u, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProtocolErrors(t *testing.T) {
	ctl := newController(t)
	a := start(t, Config{ControllerURL: ctl.srv.URL, MACs: []string{mac}, HeartbeatInterval: time.Hour})
	eventually(t, "heartbeat", func() bool { return a.Heartbeats() > 0 })
	u := a.URL()
	tok := "agent_token=" + theToken
	cases := []struct {
		method, path, body string
		status             int
		fault              string
	}{
		{"GET", "/v1/status", "", 200, ""},
		{"GET", "/v1/commands/", "", 401, "Token invalid."},
		{"GET", "/v1/commands/?agent_token=wrong", "", 401, "Token invalid."},
		{"GET", "/v1/commands/some-id?agent_token=wrong", "", 401, "Token invalid."},
		{"POST", "/v1/commands/?wait=true", `{"name":"standby.sync","params":{}}`, 401, "Token invalid."},
		{"POST", "/v1/commands/?wait=true&agent_token=bad", `{"name":"standby.sync","params":{}}`, 401, "Token invalid."},
		{"GET", "/v1/commands/?" + tok, "", 200, ""},
		{"GET", "/v1/commands/nope?" + tok, "", 404, "Command with id nope not found."},
		{"POST", "/v1/commands/?" + tok, `{"name":"bogus.thing","params":{}}`, 404, "Extension with id bogus not found."},
		{"POST", "/v1/commands/?" + tok, `{"name":"standby.nope","params":{}}`, 404, "Command with id standby.nope not found."},
		{"POST", "/v1/commands/?" + tok, `{"name":"nodot","params":{}}`, 400, "Invalid command"},
		{"POST", "/v1/commands/?" + tok, `{"name":"standby.sync","params":[1]}`, 400, "Missing or invalid name or params"},
		{"POST", "/v1/commands/?" + tok, `not json`, 400, "Missing or invalid name or params"},
		{"POST", "/v1/commands/?" + tok, `{"name":"clean.execute_clean_step","params":{}}`, 400, "missing step"},
		{"POST", "/v1/commands/?" + tok, `{"name":"rescue.finalize_rescue","params":{}}`, 400, "rescue_password"},
		{"DELETE", "/v1/commands/?" + tok, "", 404, "Not found"},
	}
	for _, tc := range cases {
		status, body := rawCall(t, tc.method, u+tc.path, tc.body)
		if status != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, status, body, tc.status)
			continue
		}
		if tc.fault == "" {
			continue
		}
		var f proto.AgentFault
		if err := json.Unmarshal([]byte(body), &f); err != nil || f.Faultcode != "Client" || !strings.Contains(f.Faultstring, tc.fault) {
			t.Errorf("%s %s: fault %s, want %q", tc.method, tc.path, body, tc.fault)
		}
	}
	// Nothing was started by the refused requests.
	if n := len(a.Commands()); n != 0 {
		t.Errorf("%d commands started", n)
	}
	for _, r := range a.Requests() {
		if r.Path == "/v1/commands/" && r.Method == "POST" && r.Name == "standby.sync" && r.Status == 200 {
			t.Error("unauthorized sync ran")
		}
	}
}

func TestStepFailuresAndVersionMismatch(t *testing.T) {
	ctl := newController(t)
	a := start(t, Config{
		ControllerURL:     ctl.srv.URL,
		MACs:              []string{mac},
		HeartbeatInterval: time.Hour,
		Steps: map[proto.StepKind][]proto.Step{
			proto.StepDeploy: {{Step: "write_image", Interface: "deploy"}, {Step: "install_coreos", Interface: "deploy"}},
		},
		StepBehavior: func(kind, step string, args map[string]any) (any, error, time.Duration) {
			if step == "install_coreos" {
				return nil, errors.New("coreos-installer exited 1"), 0
			}
			return nil, nil, 0
		},
	})
	eventually(t, "heartbeat", func() bool { return a.Heartbeats() > 0 })
	c, ag := client(), agentOf(ctl.beats()[0])
	ctx := t.Context()

	// Only deploy steps were configured.
	if s, err := c.GetSteps(ctx, ag, proto.StepClean, nil, nil); err != nil || len(s.Steps[ManagerClass]) != 0 {
		t.Errorf("clean steps %+v, %v", s, err)
	}

	run := func(step proto.StepCall, ver map[string]string) agentclient.StepStatus {
		t.Helper()
		n := a.Heartbeats()
		if _, err := c.ExecuteStep(ctx, ag, proto.StepDeploy, step, nil, nil, ver); err != nil {
			t.Fatal(err)
		}
		eventually(t, "heartbeat after "+step.Name(), func() bool { return a.Heartbeats() > n })
		cmds, err := c.Commands(ctx, ag)
		if err != nil {
			t.Fatal(err)
		}
		return agentclient.LastStepStatus(cmds, proto.StepDeploy, step)
	}
	coreos := proto.StepCall{Step: proto.Step{Step: "install_coreos", Interface: "deploy", Priority: 80}}
	if st := run(coreos, nil); st.State != agentclient.StepFailed || !strings.Contains(st.Error, "coreos-installer exited 1") ||
		st.Command.CommandError.Type != "CommandExecutionError" {
		t.Errorf("failing step: %+v", st)
	}
	if st := run(coreos, map[string]string{ManagerName: "0.9"}); st.State != agentclient.StepVersionMismatch || st.Command.CommandStatus != proto.CommandCleanVersionMismatch {
		t.Errorf("version mismatch: %+v", st)
	}
	unknown := proto.StepCall{Step: proto.Step{Step: "erase_devices", Interface: "deploy"}}
	if st := run(unknown, HardwareManagerVersion()); st.State != agentclient.StepFailed || !strings.Contains(st.Error, "erase_devices") {
		t.Errorf("unknown step: %+v", st)
	}
	write := proto.StepCall{Step: proto.Step{Step: "write_image", Interface: "deploy"}, Args: map[string]any{"image_info": map[string]any{"id": "i"}}}
	if st := run(write, HardwareManagerVersion()); st.State != agentclient.StepSucceeded || st.Result.Result != nil {
		t.Errorf("write_image: %+v", st)
	}
	if ex := a.Executed(proto.StepDeploy); !reflect.DeepEqual(ex, []string{"install_coreos", "erase_devices", "write_image"}) {
		t.Errorf("executed %v", ex)
	}
}

func TestOtherCommandsAndPowerOff(t *testing.T) {
	ctl := newController(t)
	powered := make(chan struct{})
	inv := map[string]any{"bmc_address": "0.0.0.0", "interfaces": []any{map[string]any{"name": "eth0", "mac_address": mac}}}
	a := start(t, Config{ControllerURL: ctl.srv.URL, MACs: []string{mac}, HeartbeatInterval: time.Hour, Inventory: inv,
		OnPowerOff: func() { close(powered) }})
	eventually(t, "heartbeat", func() bool { return a.Heartbeats() > 0 })
	c, ag := client(), agentOf(ctl.beats()[0])
	ctx := t.Context()

	if err := c.Sync(ctx, ag); err != nil {
		t.Fatal(err)
	}
	p, err := c.GetPartitionUUIDs(ctx, ag)
	if err != nil || p.RootUUID != RootUUID {
		t.Fatalf("partition uuids %+v, %v", p, err)
	}
	if res, err := c.InstallBootloader(ctx, ag, proto.InstallBootloaderParams{RootUUID: p.RootUUID, TargetBootMode: "uefi"}); err != nil || res.CommandName != "install_bootloader" {
		t.Fatalf("install_bootloader %+v, %v", res, err)
	}
	hw, err := c.GetHardwareInfo(ctx, ag)
	if err != nil {
		t.Fatal(err)
	}
	var gotInv map[string]any
	if err := json.Unmarshal(hw, &gotInv); err != nil || gotInv["bmc_address"] != "0.0.0.0" {
		t.Errorf("hardware info %s", hw)
	}
	logs, err := c.CollectSystemLogs(ctx, ag)
	if err != nil || !strings.HasPrefix(logs.SystemLogs, "H4sI") { // base64 of a gzip header
		t.Errorf("logs %q, %v", logs.SystemLogs, err)
	}
	if err := c.PowerOff(ctx, ag); err != nil {
		t.Fatal(err)
	}
	select {
	case <-powered:
	case <-time.After(5 * time.Second):
		t.Fatal("OnPowerOff not called")
	}
	<-a.Stopped()
	eventually(t, "agent gone", func() bool {
		_, err := agentclient.New(agentclient.Options{Retries: 1}).Status(ctx, ag)
		return errors.Is(err, agentclient.ErrUnreachable)
	})
	n := len(ctl.beats())
	time.Sleep(50 * time.Millisecond)
	if len(ctl.beats()) != n {
		t.Error("heartbeats after power off")
	}
	var names []string
	for _, r := range a.Requests() {
		if r.Method == "POST" {
			names = append(names, r.Name)
		}
	}
	want := []string{"standby.sync", "standby.get_partition_uuids", "image.install_bootloader", "poll.get_hardware_info", "log.collect_system_logs", "standby.power_off"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("commands %v, want %v", names, want)
	}
	cmds := a.Commands()
	if last := cmds[len(cmds)-1]; last.CommandName != "power_off" || last.CommandStatus != proto.CommandSucceeded {
		t.Errorf("last command %+v", last)
	}
}

func TestInspectionThenLookupAndPeriodicHeartbeats(t *testing.T) {
	ctl := newController(t)
	ctl.failLookups = 2 // the node is not in a lookup state yet
	inv := map[string]any{"cpu": map[string]any{"count": 2}, "memory": map[string]any{"total": 1 << 30}}
	a := start(t, Config{ControllerURL: ctl.srv.URL + "/", MACs: []string{mac}, HeartbeatInterval: 10 * time.Millisecond,
		Inventory: inv, Inspect: true, Version: "kiln-agent-test", CallbackURLOverride: "http://10.0.0.5:9999"})
	eventually(t, "five heartbeats", func() bool { return a.Heartbeats() >= 5 })
	if !a.Inspected() {
		t.Error("not inspected")
	}
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if len(ctl.inspections) != 1 {
		t.Fatalf("%d inspections", len(ctl.inspections))
	}
	var got map[string]any
	if err := json.Unmarshal(ctl.inspections[0].Inventory, &got); err != nil || fmt.Sprint(got) != fmt.Sprint(map[string]any{"cpu": map[string]any{"count": 2.0}, "memory": map[string]any{"total": float64(1 << 30)}}) {
		t.Errorf("inventory %s", ctl.inspections[0].Inventory)
	}
	if len(ctl.lookups) != 3 {
		t.Errorf("%d lookups, want 2 refused + 1", len(ctl.lookups))
	}
	for _, q := range ctl.lookups {
		if q.Get("node_uuid") != nodeUUID || q.Get("addresses") != mac {
			t.Errorf("lookup %v", q)
		}
	}
	for _, hb := range ctl.heartbeats {
		if hb.CallbackURL != "http://10.0.0.5:9999" || hb.AgentVersion != "kiln-agent-test" || hb.AgentToken != theToken {
			t.Errorf("heartbeat %+v", hb)
		}
	}
}

func TestTLS(t *testing.T) {
	ctl := newController(t)
	a := start(t, Config{ControllerURL: ctl.srv.URL, MACs: []string{mac}, HeartbeatInterval: time.Hour, TLS: true})
	eventually(t, "heartbeat", func() bool { return a.Heartbeats() > 0 })
	hb := ctl.beats()[0]
	if !strings.HasPrefix(hb.CallbackURL, "https://") || hb.AgentVerifyCA == "" || hb.AgentVerifyCA != a.VerifyCA() {
		t.Fatalf("heartbeat %+v", hb)
	}
	if _, err := client().GetSteps(t.Context(), agentOf(hb), proto.StepDeploy, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestStopAndCancel(t *testing.T) {
	ctl := newController(t)
	ctx, cancel := context.WithCancel(t.Context())
	a, err := Start(ctx, Config{ControllerURL: ctl.srv.URL, MACs: []string{mac}, HeartbeatInterval: 5 * time.Millisecond,
		StepBehavior: func(kind, step string, args map[string]any) (any, error, time.Duration) { return nil, nil, time.Hour }})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "heartbeats", func() bool { return a.Heartbeats() >= 2 })
	// A long step and a waiting request are abandoned by the stop.
	ag := agentOf(ctl.beats()[0])
	if _, err := client().ExecuteStep(t.Context(), ag, proto.StepClean, proto.StepCall{Step: proto.Step{Step: "erase_devices", Interface: "deploy"}}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-a.Stopped():
	case <-time.After(5 * time.Second):
		t.Fatal("not stopped by the context")
	}
	a.Stop()
	a.Stop()
	n := a.Heartbeats()
	time.Sleep(30 * time.Millisecond)
	if a.Heartbeats() != n {
		t.Error("heartbeats after stop")
	}
	if _, err := agentclient.New(agentclient.Options{Retries: 1}).Status(t.Context(), ag); !errors.Is(err, agentclient.ErrUnreachable) {
		t.Errorf("status after stop: %v", err)
	}
	if _, err := Start(t.Context(), Config{}); err == nil {
		t.Error("started without a controller URL")
	}
}

func TestMaskedTokenOnLaterLookup(t *testing.T) {
	ctl := newController(t)
	first := start(t, Config{ControllerURL: ctl.srv.URL, MACs: []string{mac}, HeartbeatInterval: time.Hour})
	eventually(t, "first agent's heartbeat", func() bool { return first.Heartbeats() > 0 })
	first.Stop()

	// A second boot gets "******": without a token of its own it rejects
	// the controller, as the real agent does.
	bare := start(t, Config{ControllerURL: ctl.srv.URL, MACs: []string{mac}, HeartbeatInterval: time.Hour})
	eventually(t, "bare agent's heartbeat", func() bool { return bare.Heartbeats() > 0 })
	if bare.Token() != "" {
		t.Errorf("token %q from a masked lookup", bare.Token())
	}
	if _, err := client().Commands(t.Context(), agentclient.Agent{URL: bare.URL(), Token: theToken}); !errors.Is(err, agentclient.ErrUnauthorized) {
		t.Errorf("tokenless agent: %v", err)
	}
	bare.Stop()

	// With the token preset (pre-generated), it keeps it.
	kept := start(t, Config{ControllerURL: ctl.srv.URL, MACs: []string{mac}, HeartbeatInterval: time.Hour, Token: theToken})
	eventually(t, "preset agent's heartbeat", func() bool { return kept.Heartbeats() > 0 })
	beats := ctl.beats()
	if hb := beats[len(beats)-1]; hb.AgentToken != theToken || hb.CallbackURL != kept.URL() {
		t.Errorf("heartbeat %+v", hb)
	}
	if _, err := client().Commands(t.Context(), agentOf(beats[len(beats)-1])); err != nil {
		t.Error(err)
	}
}
