package redfish

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
)

// Auth types of driver_info["redfish_auth_type"], as Ironic names them.
const (
	AuthBasic   = "basic"
	AuthSession = "session"
	AuthAuto    = "auto" // session, falling back to basic when the BMC refuses sessions
)

const sessionsPath = "/redfish/v1/SessionService/Sessions"

// BMCError is a failed exchange with a BMC: which BMC, which request, and
// what it answered (or why no answer came). Its text is what a node's
// last_error shows, so it names all three.
type BMCError struct {
	BMC    string // endpoint, e.g. https://10.0.0.5
	Method string
	Path   string
	Status int    // HTTP status, 0 when no answer came
	Answer string // Redfish message (code and text), or the transport error
	Err    error  // transport error, nil when the BMC answered
}

func (e *BMCError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("BMC %s: %s %s: no answer: %s", e.BMC, e.Method, e.Path, e.Answer)
	}
	return fmt.Sprintf("BMC %s: %s %s: %d %s: %s", e.BMC, e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Answer)
}

func (e *BMCError) Unwrap() error { return e.Err }

// Limits paces the requests sent to one BMC. BMCs are small embedded
// computers: a handful of concurrent requests overloads many of them.
type Limits struct {
	// Concurrency caps requests in flight to one BMC (default 4).
	Concurrency int
	// Interval is the minimum gap between the starts of two requests to one
	// BMC (default 0: no pacing beyond Concurrency).
	Interval time.Duration
	// Retries is how many times a request is repeated after a connection
	// error or a 5xx answer (0 means the default 3, negative none); Backoff is the first delay, doubled
	// each time up to MaxBackoff (defaults 200 ms and 3 s).
	Retries             int
	Backoff, MaxBackoff time.Duration
	// RequestTimeout bounds one HTTP exchange (default 30 s).
	RequestTimeout time.Duration
}

// retries is the number of repeats, never negative.
func (l Limits) retries() int { return max(l.Retries, 0) }

func (l Limits) withDefaults() Limits {
	if l.Concurrency <= 0 {
		l.Concurrency = 4
	}
	if l.Retries == 0 {
		l.Retries = 3
	}
	if l.Backoff <= 0 {
		l.Backoff = 200 * time.Millisecond
	}
	if l.MaxBackoff <= 0 {
		l.MaxBackoff = 3 * time.Second
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = 30 * time.Second
	}
	return l
}

// transport is the http.RoundTripper under one BMC's gofish client. It owns
// everything gofish leaves to the caller: authentication (one cached session,
// re-created on 401, or basic auth), the concurrency limit and pacing, and
// retries on connection errors and 5xx. Failed answers become *BMCError.
type transport struct {
	base     http.RoundTripper
	endpoint string
	limits   Limits
	sem      chan struct{}
	log      *slog.Logger
	// hwType labels its requests in the BMC metrics (a vendor variant's
	// name; "redfish" when empty).
	hwType string

	paceMu    sync.Mutex
	nextStart time.Time
	loginMu   sync.Mutex // one login at a time; callers wait for its session

	mu         sync.Mutex
	user, pass string
	authType   string
	token      string // X-Auth-Token of the cached session
	sessionURL string // its Location, for logout
	useBasic   bool   // auto mode fell back to basic auth
}

func newTransport(base http.RoundTripper, endpoint, user, pass, authType string, l Limits, log *slog.Logger) *transport {
	l = l.withDefaults()
	return &transport{base: base, endpoint: endpoint, limits: l, sem: make(chan struct{}, l.Concurrency),
		user: user, pass: pass, authType: authType, log: log}
}

// logger is the pool's logger, or the process default at the time of the
// call (so `kiln serve`'s logger, set after init, is used).
func (t *transport) logger() *slog.Logger {
	if t.log != nil {
		return t.log
	}
	return slog.Default()
}

// setCredentials updates the account; a change drops the cached session.
func (t *transport) setCredentials(user, pass, authType string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.user == user && t.pass == pass && t.authType == authType {
		return
	}
	t.user, t.pass, t.authType = user, pass, authType
	t.token, t.sessionURL, t.useBasic = "", "", false
}

// acquire takes a concurrency slot and waits for the pacing interval.
func (t *transport) acquire(ctx context.Context) error {
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if t.limits.Interval <= 0 {
		return nil
	}
	t.paceMu.Lock()
	now := time.Now()
	start := t.nextStart
	if start.Before(now) {
		start = now
	}
	t.nextStart = start.Add(t.limits.Interval)
	t.paceMu.Unlock()
	if d := time.Until(start); d > 0 {
		if err := sleep(ctx, d); err != nil {
			<-t.sem
			return err
		}
	}
	return nil
}

func (t *transport) release() { <-t.sem }

func sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// RoundTrip sends req with authentication, retrying as Limits say.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	ctx := req.Context()
	backoff := t.limits.Backoff
	reauthed := false
	for attempt := 0; ; attempt++ {
		resp, err := t.once(ctx, req, body)
		t.observe(ctx, req, resp, err)
		var le loginError
		if errors.As(err, &le) {
			// Logging in retried already; its error names the request.
			return nil, le.err
		}
		retry := false
		switch {
		case err != nil:
			retry = ctx.Err() == nil
		case resp.StatusCode == http.StatusUnauthorized && !reauthed && t.dropSession():
			// The session expired (BMC timeout or reboot): log in again once.
			t.logger().Info("redfish session rejected; logging in again", "bmc", t.endpoint, "method", req.Method, "path", req.URL.Path)
			drain(resp)
			reauthed = true
			attempt--
			continue
		case resp.StatusCode >= 500:
			retry = true
		}
		if !retry || attempt >= t.limits.retries() {
			if err != nil {
				return nil, &BMCError{BMC: t.endpoint, Method: req.Method, Path: req.URL.Path, Answer: err.Error(), Err: err}
			}
			if resp.StatusCode >= 400 {
				e := t.answerError(req, resp)
				if resp.StatusCode == http.StatusUnauthorized {
					e.Answer += " (check redfish_username and redfish_password)"
				}
				return nil, e
			}
			return resp, nil
		}
		if resp != nil {
			t.logger().Debug("redfish request retried", "bmc", t.endpoint, "method", req.Method, "path", req.URL.Path, "status", resp.StatusCode, "attempt", attempt+1)
			drain(resp)
		} else {
			t.logger().Debug("redfish request retried", "bmc", t.endpoint, "method", req.Method, "path", req.URL.Path, "error", err, "attempt", attempt+1)
		}
		if err := sleep(ctx, backoff); err != nil {
			return nil, &BMCError{BMC: t.endpoint, Method: req.Method, Path: req.URL.Path, Answer: err.Error(), Err: err}
		}
		backoff = min(backoff*2, t.limits.MaxBackoff)
	}
}

// observe counts one request to the BMC in the metrics the caller's
// context carries (driver.ObserveBMC); an error answer counts as failed.
func (t *transport) observe(ctx context.Context, req *http.Request, resp *http.Response, err error) {
	var le loginError
	if errors.As(err, &le) {
		return // the login failed (and was counted): the request was not sent
	}
	if err == nil && resp.StatusCode >= 400 {
		err = fmt.Errorf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	hwType := t.hwType
	if hwType == "" {
		hwType = HardwareType
	}
	driver.ObserveBMC(ctx, hwType, req.Method+" "+req.URL.Path, err)
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// loginError marks a failure to log in, which RoundTrip does not retry.
type loginError struct{ err error }

func (e loginError) Error() string { return e.err.Error() }

// once sends one attempt.
func (t *transport) once(ctx context.Context, orig *http.Request, body []byte) (*http.Response, error) {
	auth, err := t.authHeader(ctx)
	if err != nil {
		return nil, loginError{err}
	}
	if err := t.acquire(ctx); err != nil {
		return nil, err
	}
	defer t.release()
	rctx, cancel := context.WithTimeout(ctx, t.limits.RequestTimeout)
	req := orig.Clone(rctx)
	req.Body = nil
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	}
	req.Header.Del("Authorization")
	req.Header.Del("X-Auth-Token")
	if auth[0] != "" {
		req.Header.Set(auth[0], auth[1])
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		cancel()
		return nil, err
	}
	// Read the body now so the per-request timeout can be released.
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	cancel()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// authHeader returns the header to send, logging in first when needed.
func (t *transport) authHeader(ctx context.Context) ([2]string, error) {
	if h, ok := t.cachedAuth(); ok {
		return h, nil
	}
	// One login at a time: concurrent callers wait for its session instead
	// of each creating their own.
	t.loginMu.Lock()
	defer t.loginMu.Unlock()
	if h, ok := t.cachedAuth(); ok {
		return h, nil
	}
	t.mu.Lock()
	user, pass, authType := t.user, t.pass, t.authType
	t.mu.Unlock()
	tok, loc, err := t.login(ctx, user, pass)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		if t.user == user && t.pass == pass {
			t.token, t.sessionURL = tok, loc
		}
		return [2]string{"X-Auth-Token", tok}, nil
	}
	var be *BMCError
	if authType == AuthAuto && errors.As(err, &be) && be.Status != 0 && be.Status != http.StatusUnauthorized && be.Status != http.StatusForbidden {
		// The BMC has no usable session service (absent, or all sessions
		// taken): basic auth works on every Redfish service.
		t.logger().Warn("redfish session login failed; using basic auth", "bmc", t.endpoint, "error", err)
		t.useBasic = true
		return basicHeader(user, pass), nil
	}
	return [2]string{}, err
}

func basicHeader(user, pass string) [2]string {
	return [2]string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}
}

// cachedAuth returns the header when no login is needed.
func (t *transport) cachedAuth() ([2]string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.user == "":
		return [2]string{}, true
	case t.authType == AuthBasic || t.useBasic:
		return basicHeader(t.user, t.pass), true
	case t.token != "":
		return [2]string{"X-Auth-Token", t.token}, true
	}
	return [2]string{}, false
}

// login creates a session, retrying 5xx and connection errors (a BMC whose
// sessions are all taken answers 503).
func (t *transport) login(ctx context.Context, user, pass string) (token, location string, err error) {
	payload, _ := json.Marshal(map[string]string{"UserName": user, "Password": pass})
	backoff := t.limits.Backoff
	for attempt := 0; ; attempt++ {
		token, location, err = t.loginOnce(ctx, payload)
		var be *BMCError
		if err == nil || !errors.As(err, &be) || (be.Status != 0 && be.Status < 500) || attempt >= t.limits.retries() || ctx.Err() != nil {
			return token, location, err
		}
		if err := sleep(ctx, backoff); err != nil {
			return "", "", err
		}
		backoff = min(backoff*2, t.limits.MaxBackoff)
	}
}

func (t *transport) loginOnce(ctx context.Context, payload []byte) (token, location string, err error) {
	if err := t.acquire(ctx); err != nil {
		return "", "", err
	}
	defer t.release()
	rctx, cancel := context.WithTimeout(ctx, t.limits.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, t.endpoint+sessionsPath, bytes.NewReader(payload))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := t.base.RoundTrip(req)
	t.observe(ctx, req, resp, err)
	if err != nil {
		return "", "", &BMCError{BMC: t.endpoint, Method: "POST", Path: sessionsPath, Answer: err.Error(), Err: err}
	}
	if resp.StatusCode >= 300 {
		e := t.answerError(req, resp)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			e.Answer += " (check redfish_username and redfish_password)"
		}
		return "", "", e
	}
	drain(resp)
	tok := resp.Header.Get("X-Auth-Token")
	if tok == "" {
		return "", "", &BMCError{BMC: t.endpoint, Method: "POST", Path: sessionsPath, Status: resp.StatusCode, Answer: "session created without an X-Auth-Token header"}
	}
	return tok, resp.Header.Get("Location"), nil
}

// dropSession forgets the cached session; false when there was none (basic
// auth), so a 401 is final.
func (t *transport) dropSession() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token == "" {
		return false
	}
	t.token, t.sessionURL = "", ""
	return true
}

// logout deletes the cached session on the BMC.
func (t *transport) logout(ctx context.Context) error {
	t.mu.Lock()
	tok, loc := t.token, t.sessionURL
	t.token, t.sessionURL = "", ""
	t.mu.Unlock()
	if tok == "" || loc == "" {
		return nil
	}
	if !strings.HasPrefix(loc, "http") {
		loc = t.endpoint + loc
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, loc, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Auth-Token", tok)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return &BMCError{BMC: t.endpoint, Method: "DELETE", Path: req.URL.Path, Answer: err.Error(), Err: err}
	}
	defer drain(resp)
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusUnauthorized {
		return t.answerError(req, resp)
	}
	return nil
}

// answerError turns a failed answer into a BMCError carrying the Redfish
// message (error.code, error.message and the extended info messages).
func (t *transport) answerError(req *http.Request, resp *http.Response) *BMCError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return &BMCError{BMC: t.endpoint, Method: req.Method, Path: req.URL.Path, Status: resp.StatusCode, Answer: redfishMessage(b)}
}

// redfishMessage extracts the human part of a Redfish error body.
func redfishMessage(b []byte) string {
	var doc struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Info    []struct {
				MessageID string `json:"MessageId"`
				Message   string `json:"Message"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || (doc.Error.Code == "" && doc.Error.Message == "" && len(doc.Error.Info) == 0) {
		s := strings.TrimSpace(string(b))
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		if s == "" {
			s = "(empty body)"
		}
		return s
	}
	parts := []string{}
	if doc.Error.Code != "" || doc.Error.Message != "" {
		parts = append(parts, strings.TrimSpace(doc.Error.Code+" "+doc.Error.Message))
	}
	for _, m := range doc.Error.Info {
		if m.Message == doc.Error.Message && (m.MessageID == "" || m.MessageID == doc.Error.Code) {
			continue // the same message again
		}
		parts = append(parts, strings.TrimSpace(m.MessageID+": "+m.Message))
	}
	if msg := strings.Trim(strings.Join(parts, "; "), "; "); msg != "" {
		return msg
	}
	return "(error without a message)"
}
