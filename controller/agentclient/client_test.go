package agentclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

const token = "tok-0123456789abcdef0123456789abcdef0123456"

// seen is one request the stand-in agent received.
type seen struct {
	Method, Path string
	Query        url.Values
	Name         string
	Params       map[string]any
}

// stubAgent is an httptest agent whose answers the test scripts.
type stubAgent struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []seen
	answer func(r *http.Request, s seen) (int, any)
}

func newStub(t *testing.T, answer func(r *http.Request, s seen) (int, any)) *stubAgent {
	t.Helper()
	st := &stubAgent{t: t, answer: answer}
	st.srv = httptest.NewServer(http.HandlerFunc(st.serve))
	t.Cleanup(st.srv.Close)
	return st
}

func (st *stubAgent) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s := seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query()}
	if len(b) > 0 {
		var req struct {
			Name   string         `json:"name"`
			Params map[string]any `json:"params"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			st.t.Errorf("body %s: %v", b, err)
		}
		s.Name, s.Params = req.Name, req.Params
	}
	st.mu.Lock()
	st.reqs = append(st.reqs, s)
	st.mu.Unlock()
	code, v := st.answer(r, s)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (st *stubAgent) requests() []seen {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]seen(nil), st.reqs...)
}

func (st *stubAgent) agent() Agent { return Agent{URL: st.srv.URL, Token: token} }

func testClient(t *testing.T) *Client {
	return New(Options{Timeout: 5 * time.Second, RetryDelay: 10 * time.Millisecond, PollInterval: 5 * time.Millisecond})
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// succeed answers every command SUCCEEDED with result res, named after the request.
func succeed(res any) func(*http.Request, seen) (int, any) {
	return func(r *http.Request, s seen) (int, any) {
		_, cmd, _ := proto.SplitCommandName(s.Name)
		return 200, proto.CommandResult{ID: "c1", CommandName: cmd, CommandStatus: proto.CommandSucceeded, CommandResult: raw(res)}
	}
}

func TestStatus(t *testing.T) {
	st := newStub(t, func(r *http.Request, s seen) (int, any) {
		return 200, proto.AgentStatus{StartedAt: 1700000000.5, Version: "kiln-agent-0.1"}
	})
	got, err := testClient(t).Status(t.Context(), Agent{URL: st.srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != "kiln-agent-0.1" || got.StartedAt != 1700000000.5 {
		t.Errorf("status = %+v", got)
	}
	r := st.requests()[0]
	if r.Method != "GET" || r.Path != "/v1/status" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
}

func TestExecuteRequestShape(t *testing.T) {
	for _, wait := range []bool{true, false} {
		st := newStub(t, func(r *http.Request, s seen) (int, any) {
			return 200, proto.CommandResult{ID: "id-1", CommandName: "prepare_image", CommandStatus: proto.CommandRunning}
		})
		params := proto.PrepareImageParams{ImageInfo: proto.ImageInfo{ID: "img", URLs: []string{"http://x/img"}}}
		res, err := testClient(t).Execute(t.Context(), st.agent(), proto.CmdPrepareImage, params, wait)
		if err != nil {
			t.Fatal(err)
		}
		if res.ID != "id-1" || res.CommandStatus != proto.CommandRunning || res.CommandName != "prepare_image" {
			t.Errorf("result = %+v", res)
		}
		r := st.requests()[0]
		if r.Method != "POST" || r.Path != "/v1/commands/" {
			t.Errorf("request %s %s", r.Method, r.Path)
		}
		if r.Query.Get("agent_token") != token {
			t.Errorf("agent_token = %q", r.Query.Get("agent_token"))
		}
		if want := map[bool]string{true: "true", false: "false"}[wait]; r.Query.Get("wait") != want {
			t.Errorf("wait = %q, want %q", r.Query.Get("wait"), want)
		}
		if r.Name != "standby.prepare_image" {
			t.Errorf("name = %q", r.Name)
		}
		ii, _ := r.Params["image_info"].(map[string]any)
		if ii["id"] != "img" {
			t.Errorf("params = %v", r.Params)
		}
	}
}

func TestExecuteNilParamsIsObject(t *testing.T) {
	st := newStub(t, succeed(nil))
	if _, err := testClient(t).Execute(t.Context(), st.agent(), proto.CmdSync, nil, true); err != nil {
		t.Fatal(err)
	}
	if p := st.requests()[0].Params; p == nil || len(p) != 0 {
		t.Errorf("params = %#v, want {}", p)
	}
	// A non-object params is refused before anything is sent.
	_, err := testClient(t).Execute(t.Context(), st.agent(), proto.CmdSync, []int{1}, true)
	if err == nil || len(st.requests()) != 1 {
		t.Errorf("array params: err %v, %d requests", err, len(st.requests()))
	}
}

func TestCommandsAndCommand(t *testing.T) {
	list := []proto.CommandResult{
		{ID: "a", CommandName: "get_clean_steps", CommandStatus: proto.CommandSucceeded, CommandResult: raw(map[string]any{"clean_steps": map[string]any{}})},
		{ID: "b", CommandName: "execute_clean_step", CommandStatus: proto.CommandRunning, CommandResult: json.RawMessage("null")},
	}
	st := newStub(t, func(r *http.Request, s seen) (int, any) {
		if r.URL.Path == "/v1/commands/" {
			return 200, proto.CommandList{Commands: list}
		}
		return 200, list[1]
	})
	c := testClient(t)
	got, err := c.Commands(t.Context(), st.agent())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, list) {
		t.Errorf("commands = %+v", got)
	}
	one, err := c.Command(t.Context(), st.agent(), "b", true)
	if err != nil || one.ID != "b" {
		t.Fatalf("command = %+v, %v", one, err)
	}
	if _, err := c.Command(t.Context(), st.agent(), "b", false); err != nil {
		t.Fatal(err)
	}
	reqs := st.requests()
	want := []struct{ path, wait string }{{"/v1/commands/", ""}, {"/v1/commands/b", "true"}, {"/v1/commands/b", ""}}
	for i, w := range want {
		if reqs[i].Method != "GET" || reqs[i].Path != w.path || reqs[i].Query.Get("wait") != w.wait || reqs[i].Query.Get("agent_token") != token {
			t.Errorf("request %d = %s %s %v, want GET %s wait=%q", i, reqs[i].Method, reqs[i].Path, reqs[i].Query, w.path, w.wait)
		}
	}
}

func TestGetSteps(t *testing.T) {
	steps := proto.StepsResult{
		Kind:                   proto.StepDeploy,
		Steps:                  map[string][]proto.Step{"GenericHardwareManager": {{Step: "write_image", Interface: "deploy"}}},
		HardwareManagerVersion: map[string]string{"generic_hardware_manager": "1.2"},
	}
	st := newStub(t, succeed(steps))
	node := map[string]any{"uuid": "n1"}
	got, err := testClient(t).GetSteps(t.Context(), st.agent(), proto.StepDeploy, node, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, steps) {
		t.Errorf("steps = %+v", got)
	}
	r := st.requests()[0]
	if r.Name != "deploy.get_deploy_steps" || r.Query.Get("wait") != "true" {
		t.Errorf("request %s wait=%s", r.Name, r.Query.Get("wait"))
	}
	if r.Params["node"].(map[string]any)["uuid"] != "n1" {
		t.Errorf("node = %v", r.Params["node"])
	}
	if p, ok := r.Params["ports"].([]any); !ok || len(p) != 0 {
		t.Errorf("ports = %#v, want []", r.Params["ports"])
	}

	// Steps of another kind are a protocol error.
	st2 := newStub(t, succeed(proto.StepsResult{Kind: proto.StepClean}))
	if _, err := testClient(t).GetSteps(t.Context(), st2.agent(), proto.StepDeploy, node, nil); err == nil {
		t.Error("clean steps accepted as deploy steps")
	}
	if _, err := testClient(t).GetSteps(t.Context(), st2.agent(), "bogus", node, nil); err == nil {
		t.Error("unknown kind accepted")
	}
}

func TestExecuteStep(t *testing.T) {
	for _, kind := range []proto.StepKind{proto.StepClean, proto.StepDeploy, proto.StepService} {
		st := newStub(t, func(r *http.Request, s seen) (int, any) {
			_, cmd, _ := proto.SplitCommandName(s.Name)
			return 200, proto.CommandResult{ID: "x", CommandName: cmd, CommandStatus: proto.CommandRunning}
		})
		step := proto.StepCall{Step: proto.Step{Step: "erase_devices", Interface: "deploy", Priority: 10}, Args: map[string]any{"a": 1}}
		ver := map[string]string{"generic_hardware_manager": "1.2"}
		res, err := testClient(t).ExecuteStep(t.Context(), st.agent(), kind, step, map[string]any{"uuid": "n"}, []map[string]any{{"address": "52:54:00:00:00:01"}}, ver)
		if err != nil {
			t.Fatal(err)
		}
		if res.CommandStatus != proto.CommandRunning {
			t.Errorf("status %s", res.CommandStatus)
		}
		r := st.requests()[0]
		if want := string(kind) + ".execute_" + string(kind) + "_step"; r.Name != want {
			t.Errorf("name %q, want %q", r.Name, want)
		}
		if r.Query.Get("wait") != "false" || r.Query.Get("agent_token") != token {
			t.Errorf("query %v", r.Query)
		}
		var p proto.ExecuteStepParams
		if err := p.UnmarshalFor(kind, raw(r.Params)); err != nil {
			t.Fatal(err)
		}
		if p.Step.Name() != "erase_devices" || p.Step.Interface != "deploy" || p.Step.Priority != 10 || p.Step.Args["a"] != 1.0 {
			t.Errorf("step = %+v", p.Step)
		}
		if !reflect.DeepEqual(p.Version, ver) {
			t.Errorf("%s_version = %v", kind, p.Version)
		}
		if len(p.Ports) != 1 || p.Node["uuid"] != "n" {
			t.Errorf("node %v ports %v", p.Node, p.Ports)
		}
	}
	// No versions: no <kind>_version key at all.
	st := newStub(t, succeed(nil))
	if _, err := testClient(t).ExecuteStep(t.Context(), st.agent(), proto.StepClean, proto.StepCall{Step: proto.Step{Step: "s", Interface: "deploy"}}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.requests()[0].Params["clean_version"]; ok {
		t.Error("clean_version sent without versions")
	}
}

func TestWrappers(t *testing.T) {
	type call struct {
		name   string
		wait   string
		params map[string]any
		run    func(c *Client, a Agent) (any, error)
		result any
		want   any
	}
	calls := []call{
		{name: "standby.power_off", wait: "false", params: map[string]any{},
			run: func(c *Client, a Agent) (any, error) { return nil, c.PowerOff(context.Background(), a) }},
		{name: "standby.sync", wait: "true", params: map[string]any{},
			run: func(c *Client, a Agent) (any, error) { return nil, c.Sync(context.Background(), a) }},
		{name: "standby.get_partition_uuids", wait: "true", params: map[string]any{},
			result: map[string]string{"root uuid": "r", "efi system partition uuid": "e"},
			want:   proto.PartitionUUIDs{RootUUID: "r", EFISystemPartUUID: "e"},
			run:    func(c *Client, a Agent) (any, error) { return c.GetPartitionUUIDs(context.Background(), a) }},
		{name: "image.install_bootloader", wait: "false",
			params: map[string]any{"root_uuid": "r", "efi_system_part_uuid": "e", "target_boot_mode": "uefi"},
			run: func(c *Client, a Agent) (any, error) {
				res, err := c.InstallBootloader(context.Background(), a, proto.InstallBootloaderParams{RootUUID: "r", EFISystemPartUUID: "e", TargetBootMode: "uefi"})
				return res.CommandStatus, err
			},
			want: proto.CommandSucceeded},
		{name: "log.collect_system_logs", wait: "true", params: map[string]any{},
			result: map[string]string{"system_logs": "H4sI"}, want: proto.SystemLogsResult{SystemLogs: "H4sI"},
			run: func(c *Client, a Agent) (any, error) { return c.CollectSystemLogs(context.Background(), a) }},
		{name: "poll.get_hardware_info", wait: "true", params: map[string]any{},
			result: map[string]any{"bmc_address": "0.0.0.0"}, want: `{"bmc_address":"0.0.0.0"}`,
			run: func(c *Client, a Agent) (any, error) {
				b, err := c.GetHardwareInfo(context.Background(), a)
				return string(b), err
			}},
		{name: "rescue.finalize_rescue", wait: "true", params: map[string]any{"rescue_password": "$6$x", "hashed": true},
			run: func(c *Client, a Agent) (any, error) {
				return nil, c.FinalizeRescue(context.Background(), a, "$6$x", true)
			}},
		{name: "system.lockdown", wait: "true", params: map[string]any{},
			run: func(c *Client, a Agent) (any, error) { return nil, c.Lockdown(context.Background(), a) }},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			st := newStub(t, succeed(tc.result))
			got, err := tc.run(testClient(t), st.agent())
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("result %#v, want %#v", got, tc.want)
			}
			r := st.requests()[0]
			if r.Method != "POST" || r.Path != "/v1/commands/" || r.Name != tc.name || r.Query.Get("wait") != tc.wait || r.Query.Get("agent_token") != token {
				t.Errorf("request %s %s name=%s query=%v", r.Method, r.Path, r.Name, r.Query)
			}
			if !reflect.DeepEqual(r.Params, tc.params) {
				t.Errorf("params %#v, want %#v", r.Params, tc.params)
			}
		})
	}
}

func TestSyncCommandFailure(t *testing.T) {
	st := newStub(t, func(r *http.Request, s seen) (int, any) {
		return 200, proto.CommandResult{ID: "f", CommandName: "get_partition_uuids", CommandStatus: proto.CommandFailed,
			CommandError: &proto.CommandError{Type: "CommandExecutionError", Code: 500, Message: "Command execution failed", Details: "no root partition"}}
	})
	_, err := testClient(t).GetPartitionUUIDs(t.Context(), st.agent())
	var cf *CommandFailedError
	if !errors.As(err, &cf) || cf.Result.ID != "f" {
		t.Fatalf("err = %v", err)
	}
	var ce *proto.CommandError
	if !errors.As(err, &ce) || ce.Details != "no root partition" {
		t.Errorf("command error = %v", ce)
	}
	for _, s := range []string{"standby.get_partition_uuids", st.srv.URL, "no root partition", "FAILED"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q lacks %q", err, s)
		}
	}
	if errors.Is(err, ErrVersionMismatch) {
		t.Error("FAILED reported as version mismatch")
	}

	mm := newStub(t, func(r *http.Request, s seen) (int, any) {
		return 200, proto.CommandResult{ID: "m", CommandName: "get_clean_steps", CommandStatus: proto.CommandCleanVersionMismatch,
			CommandError: &proto.CommandError{Type: "VersionMismatch", Message: "mismatch"}}
	})
	if _, err := testClient(t).GetSteps(t.Context(), mm.agent(), proto.StepClean, nil, nil); !errors.Is(err, ErrVersionMismatch) {
		t.Errorf("version mismatch: err = %v", err)
	}
}

func TestHTTPErrors(t *testing.T) {
	cases := []struct {
		status   int
		fault    string
		sentinel error
		text     string
	}{
		{409, "Agent is busy: Command execute_deploy_step is still running", ErrBusy, "agent is busy"},
		{401, "Token invalid.", ErrUnauthorized, "agent token rejected"},
		{404, "Not found: Extension with id bogus not found.", ErrNotFound, "not found"},
		{400, "Invalid command parameters: missing step", ErrBadRequest, "rejected"},
		{500, "boom", nil, "HTTP 500: boom"},
	}
	for _, tc := range cases {
		var tries atomic.Int32
		st := newStub(t, func(r *http.Request, s seen) (int, any) {
			tries.Add(1)
			fc := "Client"
			if tc.status >= 500 {
				fc = "Server"
			}
			return tc.status, proto.AgentFault{Faultcode: fc, Faultstring: tc.fault}
		})
		step := proto.StepCall{Step: proto.Step{Step: "write_image", Interface: "deploy"}}
		_, err := testClient(t).ExecuteStep(t.Context(), st.agent(), proto.StepDeploy, step, nil, nil, nil)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%d: err %v is not *Error", tc.status, err)
		}
		if e.Status != tc.status || e.Fault.Faultstring != tc.fault || e.URL != st.srv.URL {
			t.Errorf("%d: error = %+v", tc.status, e)
		}
		if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
			t.Errorf("%d: not %v", tc.status, tc.sentinel)
		}
		want := "execute deploy.execute_deploy_step on " + st.srv.URL + ": "
		if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%d: message %q", tc.status, err)
		}
		if tries.Load() != 1 {
			t.Errorf("%d: %d tries, HTTP errors must not be retried", tc.status, tries.Load())
		}
	}
	// A non-JSON error body is kept as text.
	st := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer st.Close()
	_, err := testClient(t).Commands(t.Context(), Agent{URL: st.URL, Token: token})
	if err == nil || !strings.Contains(err.Error(), "HTTP 502: bad gateway") {
		t.Errorf("err = %v", err)
	}
}

// freePort returns an address nothing listens on (yet).
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// onWarn is a slog handler calling f on each warning.
type onWarn struct{ f func() }

func (h onWarn) Enabled(context.Context, slog.Level) bool { return true }
func (h onWarn) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.f()
	}
	return nil
}
func (h onWarn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onWarn) WithGroup(string) slog.Handler      { return h }

func TestRetryConnectionRefusedThenSuccess(t *testing.T) {
	addr := freePort(t)
	var srv *httptest.Server
	var warns int
	// The first try is refused; when the client logs it, the agent comes up
	// on that port, so the second try gets through.
	c := New(Options{RetryDelay: 10 * time.Millisecond, Logger: slog.New(onWarn{func() {
		warns++
		if srv != nil {
			return
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen %s: %v", addr, err)
			return
		}
		srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(proto.CommandResult{ID: "ok", CommandName: "sync", CommandStatus: proto.CommandSucceeded})
		})}}
		srv.Start()
	}})})
	defer func() {
		if srv != nil {
			srv.Close()
		}
	}()
	res, err := c.Execute(t.Context(), Agent{URL: "http://" + addr, Token: token}, proto.CmdSync, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "ok" || warns != 1 {
		t.Errorf("result %+v after %d failed tries", res, warns)
	}
}

func TestRetryGivesUp(t *testing.T) {
	addr := freePort(t)
	var warns int
	c := New(Options{RetryDelay: time.Millisecond, Logger: slog.New(onWarn{func() { warns++ }})})
	_, err := c.Commands(t.Context(), Agent{URL: "http://" + addr, Token: token})
	if !errors.Is(err, ErrUnreachable) || warns != DefaultRetries {
		t.Fatalf("err = %v after %d tries", err, warns)
	}
	if !strings.Contains(err.Error(), "list commands on http://"+addr) || !strings.Contains(err.Error(), "after 3 tries") {
		t.Errorf("message %q", err)
	}
	// Cancellation is not retried.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	warns = 0
	if _, err := c.Commands(ctx, Agent{URL: "http://" + addr, Token: token}); err == nil || warns != 0 {
		t.Errorf("cancelled: err %v, %d retries", err, warns)
	}
}

func TestTimeoutRetriedButNotCancellation(t *testing.T) {
	var tries atomic.Int32
	release := make(chan struct{})
	st := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tries.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer st.Close()
	defer close(release)
	// Each try times out: retried like a connection error (as Ironic).
	// On a loaded machine a try may time out before the server sees it,
	// so the server counts at most the client's tries.
	c := New(Options{Timeout: 20 * time.Millisecond, RetryDelay: time.Millisecond})
	_, err := c.Commands(t.Context(), Agent{URL: st.URL, Token: token})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "after 3 tries") || tries.Load() > 3 {
		t.Errorf("err %v after %d tries", err, tries.Load())
	}
	// The caller's deadline ends the call at once.
	tries.Store(0)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	c = New(Options{RetryDelay: time.Millisecond})
	_, err = c.Commands(ctx, Agent{URL: st.URL, Token: token})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnreachable) || tries.Load() > 1 {
		t.Errorf("err %v after %d tries", err, tries.Load())
	}
}

// dropFirstPOST is an agent whose first POST is accepted (the command starts)
// but whose connection drops before the answer, as when a network blip hits.
type dropFirstPOST struct {
	mu        sync.Mutex
	posts     int
	lists     int
	failLists int // answer 503 to this many command lists first
	cmds      []proto.CommandResult
	lastName  string // the name the started command gets
	finish    bool   // GET /v1/commands/{id} reports it SUCCEEDED
}

func (d *dropFirstPOST) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.Method == "GET" && r.URL.Path != "/v1/commands/" {
		res := d.cmds[0]
		if d.finish {
			res.CommandStatus = proto.CommandSucceeded
		}
		_ = json.NewEncoder(w).Encode(res)
		return
	}
	if r.Method == "GET" {
		d.lists++
		if d.lists <= d.failLists {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(proto.CommandList{Commands: d.cmds})
		return
	}
	d.posts++
	if d.posts == 1 {
		d.cmds = append(d.cmds, proto.CommandResult{ID: "first", CommandName: d.lastName, CommandStatus: proto.CommandRunning})
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.WriteHeader(http.StatusConflict)
	_ = json.NewEncoder(w).Encode(proto.AgentFault{Faultcode: "Client", Faultstring: "Agent is busy"})
}

func TestLostPOSTSameCommandRunningIsAccepted(t *testing.T) {
	step := proto.StepCall{Step: proto.Step{Step: "write_image", Interface: "deploy"}}
	run := func(d *dropFirstPOST) (proto.CommandResult, error) {
		st := httptest.NewServer(d)
		defer st.Close()
		return testClient(t).ExecuteStep(t.Context(), Agent{URL: st.URL, Token: token}, proto.StepDeploy, step, nil, nil, nil)
	}
	// The list right after the lost answer shows the command: no second POST.
	d := &dropFirstPOST{lastName: "execute_deploy_step"}
	res, err := run(d)
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "first" || res.CommandStatus != proto.CommandRunning || d.posts != 1 || d.lists != 1 {
		t.Errorf("result %+v after %d POSTs, %d lists", res, d.posts, d.lists)
	}
	// The list fails at first: the retried POST gets 409, then the list shows it.
	d = &dropFirstPOST{lastName: "execute_deploy_step", failLists: 1}
	res, err = run(d)
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "first" || d.posts != 2 || d.lists != 2 {
		t.Errorf("result %+v after %d POSTs, %d lists", res, d.posts, d.lists)
	}
	// Another command running: the 409 stands.
	d = &dropFirstPOST{lastName: "prepare_image"}
	if _, err := run(d); !errors.Is(err, ErrBusy) || d.posts != 2 {
		t.Errorf("err = %v after %d POSTs, want busy", err, d.posts)
	}
	// A synchronous command found running is waited for.
	d = &dropFirstPOST{lastName: "get_partition_uuids", finish: true}
	st := httptest.NewServer(d)
	defer st.Close()
	if _, err := testClient(t).GetPartitionUUIDs(t.Context(), Agent{URL: st.URL, Token: token}); err != nil || d.posts != 1 {
		t.Errorf("sync command: %v after %d POSTs", err, d.posts)
	}

	// A first-try 409 is never taken for acceptance.
	st3 := newStub(t, func(r *http.Request, s seen) (int, any) {
		if r.Method == "GET" {
			return 200, proto.CommandList{Commands: []proto.CommandResult{{ID: "x", CommandName: "execute_deploy_step", CommandStatus: proto.CommandRunning}}}
		}
		return 409, proto.AgentFault{Faultcode: "Client", Faultstring: "Agent is busy"}
	})
	if _, err := testClient(t).ExecuteStep(t.Context(), st3.agent(), proto.StepDeploy, step, nil, nil, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("first-try 409: err = %v", err)
	}
}

func TestInstallBootloaderPolls(t *testing.T) {
	var polls atomic.Int32
	final := proto.CommandFailed
	st := newStub(t, func(r *http.Request, s seen) (int, any) {
		if r.Method == "POST" {
			return 200, proto.CommandResult{ID: "bl", CommandName: "install_bootloader", CommandStatus: proto.CommandRunning}
		}
		if r.URL.Path != "/v1/commands/bl" || r.URL.Query().Get("agent_token") != token {
			t.Errorf("poll %s %v", r.URL.Path, r.URL.Query())
		}
		if polls.Add(1) < 3 {
			return 200, proto.CommandResult{ID: "bl", CommandName: "install_bootloader", CommandStatus: proto.CommandRunning}
		}
		return 200, proto.CommandResult{ID: "bl", CommandName: "install_bootloader", CommandStatus: final,
			CommandError: &proto.CommandError{Message: "Command execution failed", Details: "efibootmgr failed"}}
	})
	_, err := testClient(t).InstallBootloader(t.Context(), st.agent(), proto.InstallBootloaderParams{RootUUID: "r"})
	if err == nil || !strings.Contains(err.Error(), "efibootmgr failed") || polls.Load() != 3 {
		t.Errorf("err %v after %d polls", err, polls.Load())
	}
	// Bounded polling.
	polls.Store(-1000)
	c := New(Options{PollInterval: time.Millisecond, PollAttempts: 4})
	_, err = c.InstallBootloader(t.Context(), st.agent(), proto.InstallBootloaderParams{RootUUID: "r"})
	if err == nil || !strings.Contains(err.Error(), "still running after 4 polls") {
		t.Errorf("err = %v", err)
	}
}

// selfSigned makes a certificate for ip (not the address it is served on)
// and returns the server certificate and its PEM.
func selfSigned(t *testing.T, ip string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: ip},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP(ip)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestTLSVerifyCA(t *testing.T) {
	// The agent's certificate names 10.0.0.5 (its advertised address) but is
	// reached on 127.0.0.1: the chain is checked, the host name is not.
	cert, caPEM := selfSigned(t, "10.0.0.5")
	_, otherPEM := selfSigned(t, "10.0.0.5")
	var tries atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tries.Add(1)
		_ = json.NewEncoder(w).Encode(proto.AgentStatus{Version: "tls"})
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	srv.StartTLS()
	defer srv.Close()
	c := New(Options{RetryDelay: time.Millisecond})

	st, err := c.Status(t.Context(), Agent{URL: srv.URL, VerifyCA: caPEM})
	if err != nil || st.Version != "tls" {
		t.Fatalf("with the right CA: %+v, %v", st, err)
	}
	// Cached per PEM.
	if _, err := c.Status(t.Context(), Agent{URL: srv.URL, VerifyCA: caPEM}); err != nil {
		t.Fatal(err)
	}
	if len(c.tls) != 1 {
		t.Errorf("%d TLS clients cached", len(c.tls))
	}
	n := tries.Load()
	_, err = c.Status(t.Context(), Agent{URL: srv.URL, VerifyCA: otherPEM})
	if err == nil || !strings.Contains(err.Error(), "agent_verify_ca") {
		t.Errorf("with another CA: err = %v", err)
	}
	if errors.Is(err, ErrUnreachable) {
		t.Error("certificate failure retried")
	}
	if _, err := c.Status(t.Context(), Agent{URL: srv.URL}); err == nil {
		t.Error("https without agent_verify_ca trusted a self-signed certificate")
	}
	if _, err := c.Status(t.Context(), Agent{URL: srv.URL, VerifyCA: "not a pem"}); err == nil || !strings.Contains(err.Error(), "no certificate") {
		t.Errorf("bad PEM: err = %v", err)
	}
	if tries.Load() != n {
		t.Errorf("requests got through an untrusted connection")
	}
}

func TestErrorMessageUnreachableAndNoURL(t *testing.T) {
	_, err := testClient(t).Status(t.Context(), Agent{})
	if err == nil || !strings.Contains(err.Error(), "no URL") {
		t.Errorf("err = %v", err)
	}
}

func TestPollWait(t *testing.T) {
	for _, tc := range []struct {
		n        int
		interval time.Duration
		want     time.Duration
	}{
		{0, 6 * time.Second, 100 * time.Millisecond},
		{1, 6 * time.Second, 200 * time.Millisecond},
		{5, 6 * time.Second, 3200 * time.Millisecond},
		{6, 6 * time.Second, 6 * time.Second},
		{99, 6 * time.Second, 6 * time.Second},
		{0, 5 * time.Millisecond, 5 * time.Millisecond},
		{70, time.Hour, time.Hour}, // no shift overflow
	} {
		if got := pollWait(tc.n, firstPoll, tc.interval); got != tc.want {
			t.Errorf("pollWait(%d, %v) = %v, want %v", tc.n, tc.interval, got, tc.want)
		}
	}
}

func TestWaitCommandLooksOnHeartbeat(t *testing.T) {
	running := proto.CommandResult{ID: "bl", CommandName: "install_bootloader", CommandStatus: proto.CommandRunning}
	done := proto.CommandResult{ID: "bl", CommandName: "install_bootloader", CommandStatus: proto.CommandSucceeded}
	// stub answers the POST RUNNING, then the polls from script (the
	// last answer repeats); after each poll it heartbeats if beat says so.
	stub := func(beats chan struct{}, beat bool, script ...proto.CommandResult) (*stubAgent, *atomic.Int32) {
		var polls atomic.Int32
		st := newStub(t, func(r *http.Request, s seen) (int, any) {
			if r.Method == "POST" {
				return 200, running
			}
			i := int(polls.Add(1)) - 1
			if beat {
				select {
				case beats <- struct{}{}:
				default:
				}
			}
			return 200, script[min(i, len(script)-1)]
		})
		return st, &polls
	}
	// Pauses of an hour: only a heartbeat can end the wait in time; the
	// deadline is a safety net, not the measure.
	slow := func(attempts int) *Client {
		c := New(Options{Timeout: 5 * time.Second, PollInterval: time.Hour, PollAttempts: attempts})
		c.firstPoll = time.Hour
		return c
	}
	safety := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}

	t.Run("the agent's heartbeat after the command ends", func(t *testing.T) {
		beats := make(chan struct{}, 1)
		st, polls := stub(beats, false, done)
		a := st.agent()
		a.Heartbeats = beats
		beats <- struct{}{} // the agent ended the command and heartbeated at once
		res, err := slow(1).InstallBootloader(safety(), a, proto.InstallBootloaderParams{RootUUID: "r"})
		if err != nil || res.CommandStatus != proto.CommandSucceeded || polls.Load() != 1 {
			t.Errorf("res %+v err %v after %d polls, want SUCCEEDED after the one poll the heartbeat asked for", res, err, polls.Load())
		}
	})

	t.Run("a heartbeat's poll is not an attempt", func(t *testing.T) {
		beats := make(chan struct{}, 1)
		st, polls := stub(beats, false, running, done)
		a := st.agent()
		a.Heartbeats = beats
		beats <- struct{}{} // a periodic heartbeat: the command still runs
		c := New(Options{Timeout: 5 * time.Second, PollInterval: time.Millisecond, PollAttempts: 1})
		res, err := c.InstallBootloader(safety(), a, proto.InstallBootloaderParams{RootUUID: "r"})
		if err != nil || res.CommandStatus != proto.CommandSucceeded || polls.Load() != 2 {
			t.Errorf("res %+v err %v after %d polls, want SUCCEEDED at the one timed poll after the heartbeat's", res, err, polls.Load())
		}
	})

	t.Run("a chatty agent costs one poll per pause", func(t *testing.T) {
		beats := make(chan struct{}, 1)
		st, polls := stub(beats, true, running)
		a := st.agent()
		a.Heartbeats = beats
		beats <- struct{}{}
		c := New(Options{Timeout: 5 * time.Second, PollInterval: time.Millisecond, PollAttempts: 3})
		_, err := c.InstallBootloader(safety(), a, proto.InstallBootloaderParams{RootUUID: "r"})
		if err == nil || !strings.Contains(err.Error(), "still running after 3 polls") || polls.Load() < 3 || polls.Load() > 6 {
			t.Errorf("err %v after %d polls, want still running after 3 timed polls and at most 3 more", err, polls.Load())
		}
	})

	t.Run("a cancelled wait polls nothing", func(t *testing.T) {
		st, polls := stub(nil, false, done)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := slow(1).WaitCommand(ctx, st.agent(), "execute install_bootloader", running)
		if !errors.Is(err, context.Canceled) || polls.Load() != 0 {
			t.Errorf("err %v after %d polls", err, polls.Load())
		}
	})
}
