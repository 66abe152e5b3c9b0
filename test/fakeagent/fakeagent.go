// Package fakeagent is a scripted stand-in for kiln-agent in controller tests:
// an in-process agent that serves the agent's :9999 API on 127.0.0.1 with the
// protocol rules of the real agent (token on every /v1/commands call, 409 while
// a command runs, 404 for unknown commands, IPA's result shapes) and drives the
// controller side over real HTTP: inspection callback (optional), lookup, then
// heartbeats, periodically and at once when a command finishes.
//
// Steps do nothing; their outcome (result, error, duration) is scripted by
// Config.StepBehavior. Everything the controller sent is recorded so tests can
// assert the conversation (Requests, Executed).
package fakeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// The single hardware manager the fake advertises.
const (
	// ManagerClass groups the steps in get_X_steps results.
	ManagerClass = "GenericHardwareManager"
	// ManagerName and ManagerVersion form hardware_manager_version.
	ManagerName    = "generic_hardware_manager"
	ManagerVersion = "1.2"
	// DefaultVersion is the agent_version heartbeated when Config.Version is empty.
	DefaultVersion = "fakeagent-1.0"
	// DefaultHeartbeatInterval applies when Config.HeartbeatInterval is 0.
	DefaultHeartbeatInterval = 200 * time.Millisecond
	// HeartbeatErrorInterval is the least wait before retrying a refused
	// heartbeat (up to twice it, and never more than the interval).
	HeartbeatErrorInterval = 5 * time.Second
	// RootUUID is what standby.get_partition_uuids reports.
	RootUUID = "0b7a0b2a-5a53-4c3f-9d51-3c1f0f1e2d3c"
)

// HardwareManagerVersion is the hardware_manager_version the fake advertises
// and expects back as clean_version/deploy_version/service_version.
func HardwareManagerVersion() map[string]string {
	return map[string]string{ManagerName: ManagerVersion}
}

// Config scripts one fake agent.
type Config struct {
	// ControllerURL is the controller's base URL (http://host:port, no /v1).
	ControllerURL string
	// MACs are sent as addresses= on lookup.
	MACs []string
	// NodeUUID, when set, is sent as node_uuid= on lookup.
	NodeUUID string
	// Token, when set, is the agent token from the start (a pre-generated
	// token passed on the kernel command line, or the one a rebooted agent
	// would be handed again); a lookup answering a real token replaces it.
	Token string
	// HeartbeatInterval between heartbeats (and lookup/inspection retries);
	// default 200 ms.
	HeartbeatInterval time.Duration
	// Version is the agent_version (default DefaultVersion).
	Version string
	// Steps is what get_X_steps returns, under ManagerClass. nil means
	// DefaultSteps(); a kind missing from a non-nil map has no steps.
	// execute_X_step of a step not listed here fails like IPA's
	// HardwareManagerMethodNotFound.
	Steps map[proto.StepKind][]proto.Step
	// StepBehavior scripts each executed step (kind "clean"/"deploy"/
	// "service"; args as decoded JSON, so numbers are float64); nil: every
	// step succeeds at once with a null result. It runs in the command's
	// goroutine and may block (the command stays RUNNING meanwhile). An error
	// makes the command FAILED with the error in its details; delay keeps it
	// RUNNING that much longer.
	StepBehavior func(kind, step string, args map[string]any) (result any, err error, delay time.Duration)
	// Inventory is returned by poll.get_hardware_info and posted on
	// inspection (a proto.Inventory or any value encoding to the same JSON).
	Inventory any
	// Inspect: POST the inventory to /v1/continue_inspection before lookup.
	Inspect bool
	// CallbackURLOverride replaces the agent's own URL in heartbeats.
	CallbackURLOverride string
	// TLS serves https with a self-signed certificate sent as agent_verify_ca.
	TLS bool
	// OnPowerOff is called when standby.power_off completes; after it the
	// agent stops, as the machine is off.
	OnPowerOff func()
	// Logger (default: discard).
	Logger *slog.Logger
	// URL, when set, is the agent's URL and no listener is started: the
	// caller serves it by routing its requests to Agent.ServeHTTP, so that
	// one listener can carry thousands of agents (test/fleet).
	URL string
	// HTTPClient talks to the controller (default: one of its own with a
	// 10 s timeout); a fleet shares one transport among its agents.
	HTTPClient *http.Client
	// NoRecord keeps Requests empty: a long-running fleet agent would
	// otherwise hold every request body it was sent.
	NoRecord bool
}

// DefaultSteps are IPA's generic steps (clean: erase_devices_metadata 99,
// erase_devices 10, …; deploy: write_image and friends at 0).
func DefaultSteps() map[proto.StepKind][]proto.Step {
	st := func(name, iface string, prio int, reboot bool) proto.Step {
		return proto.Step{Step: name, Priority: prio, Interface: iface, RebootRequested: reboot, Abortable: true}
	}
	return map[proto.StepKind][]proto.Step{
		proto.StepClean: {
			st("erase_devices_metadata", "deploy", 99, false),
			st("erase_devices", "deploy", 10, false),
			st("erase_devices_express", "deploy", 0, false),
			st("erase_pstore", "deploy", 0, false),
			st("delete_configuration", "raid", 0, false),
			st("create_configuration", "raid", 0, false),
		},
		proto.StepDeploy: {
			st("erase_devices_metadata", "deploy", 0, false),
			st("apply_configuration", "raid", 0, false),
			st("write_image", "deploy", 0, false),
			st("inject_files", "deploy", 0, false),
		},
		proto.StepService: {
			st("burnin_cpu", "deploy", 0, false),
		},
	}
}

// Recorded is one request the controller sent to the agent.
type Recorded struct {
	Method string
	Path   string
	Query  url.Values
	// Token is the agent_token query parameter ("" if absent).
	Token string
	// Name and Params are the parsed body of POST /v1/commands/ (Name with
	// its extension, "deploy.execute_deploy_step").
	Name   string
	Params map[string]any
	// Body is the raw request body.
	Body json.RawMessage
	// Status is the HTTP status the agent answered.
	Status int
}

// Agent is a running fake agent.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	srv    *httptest.Server
	url    string
	caPEM  string
	hc     *http.Client
	steps  map[proto.StepKind][]proto.Step
	force  chan struct{}
	stopCh chan struct{}
	once   sync.Once
	wg     sync.WaitGroup

	mu         sync.Mutex
	token      string
	nodeUUID   string
	cmds       []*command
	reqs       []Recorded
	executed   map[proto.StepKind][]string
	heartbeats int
	lastErr    error
	inspected  bool
}

type command struct {
	res  proto.CommandResult
	done chan struct{}
}

// Start serves the agent API and begins the controller conversation in the
// background. Cancelling ctx stops the agent like Stop.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.ControllerURL == "" {
		return nil, fmt.Errorf("fakeagent: ControllerURL is required")
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	a := &Agent{
		cfg:      cfg,
		log:      cfg.Logger,
		hc:       cfg.HTTPClient,
		steps:    cfg.Steps,
		force:    make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		executed: map[proto.StepKind][]string{},
		token:    cfg.Token,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.hc == nil {
		a.hc = &http.Client{Timeout: 10 * time.Second}
	}
	if a.steps == nil {
		a.steps = DefaultSteps()
	}
	switch {
	case cfg.URL != "" && cfg.TLS:
		return nil, fmt.Errorf("fakeagent: TLS needs the agent's own listener (URL must be empty)")
	case cfg.URL != "":
		a.url = cfg.URL
	default:
		a.srv = httptest.NewUnstartedServer(http.HandlerFunc(a.ServeHTTP))
		if cfg.TLS {
			a.srv.StartTLS()
			a.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.srv.Certificate().Raw}))
		} else {
			a.srv.Start()
		}
		a.url = a.srv.URL
	}
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.run()
	}()
	go func() {
		defer a.wg.Done()
		select {
		case <-ctx.Done():
			go a.Stop()
		case <-a.stopCh:
		}
	}()
	return a, nil
}

// URL is the agent API's own URL (http(s)://127.0.0.1:port).
func (a *Agent) URL() string { return a.url }

// VerifyCA is the PEM sent as agent_verify_ca ("" without TLS).
func (a *Agent) VerifyCA() string { return a.caPEM }

// Token is the agent token received at lookup ("" before).
func (a *Agent) Token() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
}

// NodeUUID is the node the lookup found ("" before).
func (a *Agent) NodeUUID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nodeUUID
}

// Requests returns every request the controller sent to the agent, in order.
func (a *Agent) Requests() []Recorded {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Recorded(nil), a.reqs...)
}

// Executed returns the names of the steps of kind that execute_X_step
// started, in order (failed ones included, version mismatches not).
func (a *Agent) Executed(kind proto.StepKind) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.executed[kind]...)
}

// Commands returns the agent's command results, oldest first.
func (a *Agent) Commands() []proto.CommandResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]proto.CommandResult, len(a.cmds))
	for i, c := range a.cmds {
		out[i] = c.res
	}
	return out
}

// Heartbeats counts the heartbeats the controller accepted (2xx).
func (a *Agent) Heartbeats() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heartbeats
}

// Inspected reports whether the controller accepted the inspection data.
func (a *Agent) Inspected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inspected
}

// LastError is the last failure talking to the controller (nil if the last
// exchange succeeded), for test diagnostics.
func (a *Agent) LastError() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastErr
}

// Heartbeat asks for a heartbeat now (after lookup).
func (a *Agent) Heartbeat() {
	select {
	case a.force <- struct{}{}:
	default:
	}
}

// Stopped is closed once Stop has begun.
func (a *Agent) Stopped() <-chan struct{} { return a.stopCh }

// Stop stops heartbeating and closes the listener: the agent is gone, as when
// the machine dies or powers off. Running commands are abandoned. Safe to
// call more than once and from any goroutine.
func (a *Agent) Stop() {
	a.once.Do(func() {
		close(a.stopCh)
		if a.srv != nil {
			a.srv.Close()
			a.srv.CloseClientConnections()
		}
	})
	a.wg.Wait()
}

func (a *Agent) stopped() bool {
	select {
	case <-a.stopCh:
		return true
	default:
		return false
	}
}

// sleep waits d; false when the agent stopped meanwhile.
func (a *Agent) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.stopCh:
		return false
	case <-t.C:
		return true
	}
}

func (a *Agent) setErr(err error) {
	a.mu.Lock()
	a.lastErr = err
	a.mu.Unlock()
	if err != nil {
		a.log.Debug("fakeagent: controller exchange failed", "err", err)
	}
}

// ---------------------------------------------------------------------------
// Controller side

func (a *Agent) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	if a.cfg.Inspect {
		for !a.inspect(ctx) {
			if !a.sleep(a.cfg.HeartbeatInterval) {
				return
			}
		}
	}
	for !a.lookup(ctx) {
		if !a.sleep(a.cfg.HeartbeatInterval) {
			return
		}
	}
	for {
		wait := a.cfg.HeartbeatInterval
		if !a.heartbeat(ctx) {
			// As kiln-agent: a refused heartbeat (409 while the node is
			// locked, a controller gone) is retried 5–10 s later.
			wait = min(wait, HeartbeatErrorInterval+time.Duration(rand.Int64N(int64(HeartbeatErrorInterval))))
		}
		t := time.NewTimer(wait)
		select {
		case <-a.stopCh:
			t.Stop()
			return
		case <-t.C:
		case <-a.force:
			t.Stop()
		}
	}
}

// do sends one request to the controller; out receives a 2xx JSON body.
func (a *Agent) do(ctx context.Context, op, method, u, microversion string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s: encode: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if microversion != "" {
		req.Header.Set("X-OpenStack-Ironic-API-Version", microversion)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: HTTP %d: %s", op, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s: decode: %w", op, err)
		}
	}
	return nil
}

func (a *Agent) base() string { return strings.TrimRight(a.cfg.ControllerURL, "/") }

func (a *Agent) inspect(ctx context.Context) bool {
	inv, err := json.Marshal(a.cfg.Inventory)
	if err != nil {
		a.setErr(fmt.Errorf("inspection: encode inventory: %w", err))
		return false
	}
	req := proto.InspectionRequest{
		Inventory: inv,
		Configuration: &proto.InspectionConfiguration{
			Collectors: []string{"default"},
			Managers:   []proto.InspectionManager{{Name: ManagerName, Version: ManagerVersion}},
		},
	}
	var resp proto.InspectionResponse
	if err := a.do(ctx, "inspection callback", http.MethodPost, a.base()+"/v1/continue_inspection", "", req, &resp); err != nil {
		a.setErr(err)
		return false
	}
	a.mu.Lock()
	a.inspected = true
	a.lastErr = nil
	if u := resp.NodeUUID(); u != "" {
		a.nodeUUID = u
	}
	if resp.Config != nil && resp.Config.AgentToken != "" && resp.Config.AgentToken != proto.MaskedToken {
		a.token = resp.Config.AgentToken
	}
	a.mu.Unlock()
	return true
}

func (a *Agent) lookup(ctx context.Context) bool {
	q := url.Values{}
	if len(a.cfg.MACs) > 0 {
		q.Set("addresses", strings.Join(a.cfg.MACs, ","))
	}
	uuid := a.cfg.NodeUUID
	if uuid == "" {
		uuid = a.NodeUUID()
	}
	if uuid != "" {
		q.Set("node_uuid", uuid)
	}
	var resp proto.LookupResponse
	if err := a.do(ctx, "lookup", http.MethodGet, a.base()+"/v1/lookup?"+q.Encode(), proto.AgentLookupMicroversion, nil, &resp); err != nil {
		a.setErr(err)
		return false
	}
	if resp.Node.UUID == "" {
		a.setErr(fmt.Errorf("lookup: response without node uuid"))
		return false
	}
	a.mu.Lock()
	a.nodeUUID = resp.Node.UUID
	if t := resp.Config.AgentToken; t != "" && t != proto.MaskedToken {
		a.token = t
	}
	a.lastErr = nil
	a.mu.Unlock()
	return true
}

// heartbeat sends one heartbeat; false when the controller did not accept it.
func (a *Agent) heartbeat(ctx context.Context) bool {
	cb := a.cfg.CallbackURLOverride
	if cb == "" {
		cb = a.url
	}
	a.mu.Lock()
	uuid, token := a.nodeUUID, a.token
	a.mu.Unlock()
	req := proto.HeartbeatRequest{CallbackURL: cb, AgentVersion: a.cfg.Version, AgentToken: token, AgentVerifyCA: a.caPEM}
	err := a.do(ctx, "heartbeat", http.MethodPost, a.base()+"/v1/heartbeat/"+url.PathEscape(uuid), proto.AgentHeartbeatMicroversion, req, nil)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if !a.stopped() {
			a.lastErr = err
		}
		return false
	}
	a.lastErr = nil
	a.heartbeats++
	return true
}

// ---------------------------------------------------------------------------
// Agent API

type restError struct {
	status  int
	typ     string
	message string
	details string
}

func (e *restError) Error() string {
	if e.details == "" {
		return e.message
	}
	return e.message + ": " + e.details
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// statusWriter remembers the status for the record.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// ServeHTTP answers one request of the agent API (the controller's side of
// the conversation). Start's listener routes here; with Config.URL the
// caller does.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	rec := Recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Token: r.URL.Query().Get("agent_token")}
	if len(body) > 0 {
		rec.Body = body
		var cr struct {
			Name   string         `json:"name"`
			Params map[string]any `json:"params"`
		}
		if json.Unmarshal(body, &cr) == nil {
			rec.Name, rec.Params = cr.Name, cr.Params
		}
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	status, v := a.route(r, body)
	writeJSON(sw, status, v)
	rec.Status = sw.status
	if a.cfg.NoRecord {
		return
	}
	a.mu.Lock()
	a.reqs = append(a.reqs, rec)
	a.mu.Unlock()
}

// route answers one request: the status and the JSON body.
func (a *Agent) route(r *http.Request, body []byte) (int, any) {
	status, v, err := a.dispatch(r, body)
	if err != nil {
		var re *restError
		if !errors.As(err, &re) {
			re = &restError{status: http.StatusInternalServerError, message: err.Error()}
		}
		fc := "Client"
		if re.status >= 500 {
			fc = "Server"
		}
		return re.status, proto.AgentFault{Faultcode: fc, Faultstring: re.Error()}
	}
	return status, v
}

func (a *Agent) dispatch(r *http.Request, body []byte) (int, any, error) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	q := r.URL.Query()
	wait := strings.EqualFold(q.Get("wait"), "true")
	switch {
	case r.Method == http.MethodGet && p == "/v1/status":
		return http.StatusOK, proto.AgentStatus{StartedAt: float64(time.Now().Unix()), Version: a.cfg.Version}, nil
	case r.Method == http.MethodGet && p == "/v1/commands":
		if err := a.checkToken(q); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, proto.CommandList{Commands: a.Commands()}, nil
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/commands/"):
		if err := a.checkToken(q); err != nil {
			return 0, nil, err
		}
		id := strings.TrimPrefix(p, "/v1/commands/")
		c := a.command(id)
		if c == nil {
			return 0, nil, &restError{status: http.StatusNotFound, message: "Not found", details: "Command with id " + id + " not found."}
		}
		return a.answer(r.Context(), c, wait)
	case r.Method == http.MethodPost && p == "/v1/commands":
		var req proto.CommandRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Name == "" || len(req.Params) == 0 || req.Params[0] != '{' {
			return 0, nil, &restError{status: http.StatusBadRequest, message: "Missing or invalid name or params"}
		}
		if err := a.checkToken(q); err != nil {
			return 0, nil, err
		}
		c, err := a.execute(req.Name, req.Params)
		if err != nil {
			return 0, nil, err
		}
		return a.answer(r.Context(), c, wait)
	}
	return 0, nil, &restError{status: http.StatusNotFound, message: "Not found", details: r.Method + " " + r.URL.Path}
}

func (a *Agent) answer(ctx context.Context, c *command, wait bool) (int, any, error) {
	if wait {
		select {
		case <-c.done:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-a.stopCh:
			return 0, nil, &restError{status: http.StatusServiceUnavailable, message: "agent stopped"}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return http.StatusOK, c.res, nil
}

func (a *Agent) checkToken(q url.Values) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == "" || q.Get("agent_token") != a.token {
		return &restError{status: http.StatusUnauthorized, message: "Token invalid."}
	}
	return nil
}

func (a *Agent) command(id string) *command {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.cmds {
		if c.res.ID == id {
			return c
		}
	}
	return nil
}
