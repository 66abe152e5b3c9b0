// Package agentclient is the controller's client for the agent's :9999 API
// (the ironic-python-agent protocol): it sends commands to an agent that has
// heartbeated, with the token the controller issued, and reads their results.
// It works with kiln-agent and with ironic-python-agent alike.
//
// The conductor owns the decisions (which step, when); this package only
// speaks the wire protocol, retries the way Ironic does (connection errors
// only), and turns IPA's fault bodies into typed errors.
package agentclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// Defaults of Options.
const (
	DefaultTimeout      = 60 * time.Second
	DefaultRetries      = 3
	DefaultRetryDelay   = 2 * time.Second
	DefaultPollInterval = 6 * time.Second
	DefaultPollAttempts = 100
)

// maxBody bounds a response (a log collection result is a few MiB).
const maxBody = 64 << 20

// Options configure a Client; zero values mean the defaults.
type Options struct {
	// Timeout bounds each HTTP call (default 60 s, as Ironic).
	Timeout time.Duration
	// Retries is how many times a call is tried on connection errors (default 3).
	Retries int
	// RetryDelay is the pause between tries (default 2 s).
	RetryDelay time.Duration
	// PollInterval and PollAttempts govern InstallBootloader's polling
	// (default at most 100 times, every 6 s as Ironic once the first
	// polls, from 100 ms doubling, found it still running).
	PollInterval time.Duration
	PollAttempts int
	// HTTPClient is used for http:// agents; its Transport (when an
	// *http.Transport) is the template for https agents. Default: a clone of
	// http.DefaultTransport.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Agent identifies one agent as its heartbeat described it.
type Agent struct {
	// URL is the callback_url: http(s)://ip:9999.
	URL string
	// Token is the agent token the controller issued at lookup.
	Token string
	// VerifyCA is the agent_verify_ca PEM; when set the agent is trusted only
	// if its certificate chains to it.
	VerifyCA string
	// Heartbeats, when set, signals the agent's heartbeats. An agent
	// heartbeats as soon as an asynchronous command ends, so WaitCommand
	// looks at the command then rather than at its next pause.
	Heartbeats <-chan struct{}
}

// Client talks to agents. It is safe for concurrent use; one per controller.
type Client struct {
	opts  Options
	plain *http.Client
	log   *slog.Logger

	// firstPoll is WaitCommand's first pause (tests lengthen it).
	firstPoll time.Duration

	mu  sync.Mutex
	tls map[[32]byte]*http.Client // by sha256 of the PEM
}

// New returns a Client.
func New(opts Options) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Retries <= 0 {
		opts.Retries = DefaultRetries
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultRetryDelay
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.PollAttempts <= 0 {
		opts.PollAttempts = DefaultPollAttempts
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	plain := opts.HTTPClient
	if plain == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// One controller talks to thousands of agents, a few requests each
		// per heartbeat: keep a connection per agent rather than 100 in all.
		tr.MaxIdleConns = 4096
		plain = &http.Client{Transport: tr}
	}
	return &Client{opts: opts, plain: plain, log: log, firstPoll: firstPoll, tls: map[[32]byte]*http.Client{}}
}

// ---------------------------------------------------------------------------
// Errors

// Sentinels matched with errors.Is against errors from the Client.
var (
	// ErrBusy: 409, another command is still running on the agent.
	ErrBusy = errors.New("agent is busy")
	// ErrUnauthorized: 401, the agent token is missing or wrong.
	ErrUnauthorized = errors.New("agent token rejected")
	// ErrNotFound: 404, unknown extension, command or command id.
	ErrNotFound = errors.New("not found on agent")
	// ErrBadRequest: 400, the agent rejected the name or params.
	ErrBadRequest = errors.New("agent rejected the request")
	// ErrUnreachable: the agent could not be reached (after the retries).
	ErrUnreachable = errors.New("agent unreachable")
	// ErrVersionMismatch: a command ended CLEAN_VERSION_MISMATCH (the
	// controller's cached steps are stale; fetch them again).
	ErrVersionMismatch = errors.New("hardware manager version mismatch")
)

// Error is a failed call to an agent: an HTTP error answer (Status and the
// fault body) or a transport/decoding failure (Status 0, Err).
type Error struct {
	// Op says what was being done ("execute deploy.execute_deploy_step").
	Op string
	// URL is the agent's URL.
	URL    string
	Status int
	Fault  proto.AgentFault
	Err    error
}

func (e *Error) Error() string { return secrets.Scrub(e.text()) }

// text is the error's message before scrubbing: the URL of a failed request
// (in Err) carries the agent token.
func (e *Error) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s: ", e.Op, e.URL)
	if e.Status == 0 {
		if errors.Is(e.Err, ErrUnreachable) {
			b.WriteString(e.Err.Error())
		} else {
			fmt.Fprintf(&b, "%v", e.Err)
		}
		return b.String()
	}
	if s := e.sentinel(); s != nil {
		b.WriteString(s.Error())
		b.WriteString(" (")
	}
	fmt.Fprintf(&b, "HTTP %d", e.Status)
	if e.Fault.Faultstring != "" {
		b.WriteString(": " + e.Fault.Faultstring)
	}
	if e.sentinel() != nil {
		b.WriteString(")")
	}
	return b.String()
}

func (e *Error) sentinel() error {
	switch e.Status {
	case http.StatusConflict:
		return ErrBusy
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusBadRequest:
		return ErrBadRequest
	}
	return nil
}

// Unwrap exposes the sentinel for the status and the underlying error.
func (e *Error) Unwrap() []error {
	var out []error
	if s := e.sentinel(); s != nil {
		out = append(out, s)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// CommandFailedError is a command that ran and did not succeed (FAILED or
// CLEAN_VERSION_MISMATCH), returned by the synchronous wrappers.
type CommandFailedError struct {
	Op     string
	URL    string
	Result proto.CommandResult
}

func (e *CommandFailedError) Error() string {
	return fmt.Sprintf("%s on %s: command %s %s: %s", e.Op, e.URL, e.Result.CommandName, e.Result.CommandStatus, CommandErrorMessage(e.Result))
}

// Unwrap exposes ErrVersionMismatch and the command's *proto.CommandError.
func (e *CommandFailedError) Unwrap() []error {
	var out []error
	if e.Result.CommandStatus == proto.CommandCleanVersionMismatch {
		out = append(out, ErrVersionMismatch)
	}
	if e.Result.CommandError != nil {
		out = append(out, e.Result.CommandError)
	}
	return out
}

// CommandErrorMessage is what went wrong in a command, as Ironic reports it:
// the error's details, else its message.
func CommandErrorMessage(r proto.CommandResult) string {
	if e := r.CommandError; e != nil {
		if e.Details != "" {
			return e.Details
		}
		if e.Message != "" {
			return e.Message
		}
		if e.Type != "" {
			return e.Type
		}
	}
	return "unknown error (command_status " + string(r.CommandStatus) + ")"
}

// ---------------------------------------------------------------------------
// Transport

func (c *Client) httpClient(a Agent) (*http.Client, error) {
	if a.VerifyCA == "" || !strings.HasPrefix(strings.ToLower(a.URL), "https:") {
		return c.plain, nil
	}
	key := sha256.Sum256([]byte(a.VerifyCA))
	c.mu.Lock()
	defer c.mu.Unlock()
	if hc, ok := c.tls[key]; ok {
		return hc, nil
	}
	cfg, err := verifyCATLSConfig(a.VerifyCA)
	if err != nil {
		return nil, err
	}
	var tr *http.Transport
	if t, ok := c.plain.Transport.(*http.Transport); ok {
		tr = t.Clone()
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	tr.TLSClientConfig = cfg
	tr.MaxIdleConnsPerHost = 2
	tr.IdleConnTimeout = 90 * time.Second
	hc := &http.Client{Transport: tr}
	// Agents come and go (a new certificate on every boot): keep the cache
	// bounded rather than tracking lifetimes.
	if len(c.tls) >= 256 {
		for k, old := range c.tls {
			old.CloseIdleConnections()
			delete(c.tls, k)
		}
	}
	c.tls[key] = hc
	return hc, nil
}

// verifyCATLSConfig trusts exactly the certificates in pem. The host name is
// not checked: the agent generates its certificate for the address it
// advertises, which need not be the address the controller reaches it on
// (NAT, advertise_host), and the PEM itself came over the token-authenticated
// heartbeat of this very agent, so the pinned chain is what proves identity.
func verifyCATLSConfig(pemText string) (*tls.Config, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(pemText)) {
		return nil, fmt.Errorf("agent_verify_ca: no certificate in PEM")
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // the chain is verified in VerifyConnection, only the host name is not
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("agent presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots:         roots,
				Intermediates: inter,
				KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				return fmt.Errorf("verify agent certificate against agent_verify_ca: %w", err)
			}
			return nil
		},
	}, nil
}

// call does one HTTP exchange with retries on connection errors (and on
// timeouts of one try, as Ironic). body is JSON-encoded when non-nil; out
// receives the 2xx body. accepted, when set (for POSTs), is asked whether an
// earlier try was in fact accepted by the agent: after a try failed on the
// connection, and when a retried try is answered 409 busy; true ends the call
// successfully.
func (c *Client) call(ctx context.Context, a Agent, op, method, path string, q url.Values, body []byte, out any, accepted func(context.Context) bool) error {
	base := strings.TrimRight(a.URL, "/")
	if base == "" {
		return &Error{Op: op, URL: a.URL, Err: fmt.Errorf("agent has no URL")}
	}
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	hc, err := c.httpClient(a)
	if err != nil {
		return &Error{Op: op, URL: a.URL, Err: err}
	}
	var lastErr error
	for try := 1; try <= c.opts.Retries; try++ {
		if try > 1 {
			t := time.NewTimer(c.opts.RetryDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return &Error{Op: op, URL: a.URL, Err: fmt.Errorf("%w (last: %v)", ctx.Err(), lastErr)}
			case <-t.C:
			}
		}
		status, fault, err := c.once(ctx, hc, method, u, body, out)
		switch {
		case err == nil && status/100 == 2:
			return nil
		case err == nil:
			if status == http.StatusConflict && try > 1 && accepted != nil && accepted(ctx) {
				c.log.Info("retried command had been accepted by the agent", "op", op, "agent", a.URL)
				return nil
			}
			return &Error{Op: op, URL: a.URL, Status: status, Fault: fault}
		case !retryable(ctx, err):
			return &Error{Op: op, URL: a.URL, Err: err}
		}
		lastErr = err
		c.log.Warn("agent connection failed", "op", op, "agent", a.URL, "try", try, "err", secrets.Scrub(err.Error()))
		if accepted != nil && accepted(ctx) {
			c.log.Info("command had been accepted by the agent before the connection failed", "op", op, "agent", a.URL)
			return nil
		}
	}
	return &Error{Op: op, URL: a.URL, Err: fmt.Errorf("%w after %d tries: %v", ErrUnreachable, c.opts.Retries, lastErr)}
}

// errDecode marks a 2xx body that did not decode; never retried.
var errDecode = errors.New("decode agent response")

func (c *Client) once(ctx context.Context, hc *http.Client, method, u string, body []byte, out any) (int, proto.AgentFault, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, proto.AgentFault{}, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, proto.AgentFault{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, proto.AgentFault{}, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var f proto.AgentFault
		if json.Unmarshal(b, &f) != nil || f.Faultstring == "" {
			f = proto.AgentFault{Faultstring: strings.TrimSpace(string(b[:min(len(b), 512)]))}
		}
		return resp.StatusCode, f, nil
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, proto.AgentFault{}, fmt.Errorf("%w: %w", errDecode, err)
		}
	}
	return resp.StatusCode, proto.AgentFault{}, nil
}

// ---------------------------------------------------------------------------
// Raw API

// Status is GET /v1/status (no token needed).
func (c *Client) Status(ctx context.Context, a Agent) (proto.AgentStatus, error) {
	var s proto.AgentStatus
	err := c.call(ctx, a, "get status", http.MethodGet, "/v1/status", nil, nil, &s, nil)
	return s, err
}

// Execute is POST /v1/commands/?wait=&agent_token= with name ("ext.cmd") and
// params (a struct or map encoding to a JSON object; nil means {}). A command
// that ran and failed is not an error here: check the result's status.
// Connection errors and timeouts are retried; but when a try failed on the
// connection, or a retried try is answered 409 busy, and the agent's last
// command has this name and is RUNNING, the earlier try got through: the POST
// counts as accepted and that command's result is returned (RUNNING, even
// with wait=true).
func (c *Client) Execute(ctx context.Context, a Agent, name string, params any, wait bool) (proto.CommandResult, error) {
	op := "execute " + name
	req, err := proto.NewCommandRequest(name, params)
	if err != nil {
		return proto.CommandResult{}, &Error{Op: op, URL: a.URL, Err: err}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return proto.CommandResult{}, &Error{Op: op, URL: a.URL, Err: err}
	}
	_, cmd, _ := proto.SplitCommandName(name)
	var res proto.CommandResult
	// accepted looks for the command a failed try may have started: the
	// agent's last command, with this name, still RUNNING. One try only: the
	// POST's own retries cover a flaky agent.
	accepted := func(ctx context.Context) bool {
		var l proto.CommandList
		hc, err := c.httpClient(a)
		if err != nil {
			return false
		}
		u := strings.TrimRight(a.URL, "/") + "/v1/commands/?" + url.Values{"agent_token": {a.Token}}.Encode()
		if status, _, err := c.once(ctx, hc, http.MethodGet, u, nil, &l); err != nil || status != http.StatusOK || len(l.Commands) == 0 {
			return false
		}
		last := l.Commands[len(l.Commands)-1]
		if last.CommandName == cmd && last.CommandStatus == proto.CommandRunning {
			res = last
			return true
		}
		return false
	}
	q := url.Values{"wait": {fmt.Sprint(wait)}, "agent_token": {a.Token}}
	if err := c.call(ctx, a, op, http.MethodPost, "/v1/commands/", q, body, &res, accepted); err != nil {
		return proto.CommandResult{}, err
	}
	return res, nil
}

// Commands is GET /v1/commands/?agent_token=: every command, oldest first.
func (c *Client) Commands(ctx context.Context, a Agent) ([]proto.CommandResult, error) {
	var l proto.CommandList
	q := url.Values{"agent_token": {a.Token}}
	if err := c.call(ctx, a, "list commands", http.MethodGet, "/v1/commands/", q, nil, &l, nil); err != nil {
		return nil, err
	}
	return l.Commands, nil
}

// Command is GET /v1/commands/{id}?agent_token=[&wait=true].
func (c *Client) Command(ctx context.Context, a Agent, id string, wait bool) (proto.CommandResult, error) {
	var r proto.CommandResult
	q := url.Values{"agent_token": {a.Token}}
	if wait {
		q.Set("wait", "true")
	}
	err := c.call(ctx, a, "get command "+id, http.MethodGet, "/v1/commands/"+url.PathEscape(id), q, nil, &r, nil)
	return r, err
}

// retryable reports a failure worth another try: a connection error or the
// timeout of one try; not the caller's cancellation or deadline, not a
// certificate the agent_verify_ca does not vouch for, not a bad answer.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, errDecode) {
		return false
	}
	var tlsErr *tls.CertificateVerificationError
	if errors.As(err, &tlsErr) || strings.Contains(err.Error(), "verify agent certificate") {
		return false
	}
	return true
}
