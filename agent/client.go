package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// Microversion is an Ironic API microversion "1.N".
type Microversion struct{ Major, Minor int }

func (v Microversion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports v < w.
func (v Microversion) Less(w Microversion) bool {
	return v.Major < w.Major || (v.Major == w.Major && v.Minor < w.Minor)
}

// ParseMicroversion parses "1.82".
func ParseMicroversion(s string) (Microversion, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ".")
	maj, err1 := strconv.Atoi(a)
	min, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || maj < 0 || min < 0 {
		return Microversion{}, fmt.Errorf("bad microversion %q", s)
	}
	return Microversion{maj, min}, nil
}

func minVersion(a, b Microversion) Microversion {
	if a.Less(b) {
		return a
	}
	return b
}

// fallbackMicroversion is assumed when the controller's GET / fails (IPA does the same).
var fallbackMicroversion = Microversion{1, 31}

const microversionHeader = "X-OpenStack-Ironic-API-Version"

// HTTPError is a non-2xx answer from the controller.
type HTTPError struct {
	Op     string
	Status int
	Body   string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.Op, e.Status, e.Body)
}

// client talks to the controller's /v1.
type client struct {
	base      string
	http      *http.Client
	userAgent string
}

func newHTTPClient(insecure bool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // ipa-insecure asks for it
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

func (c *client) do(ctx context.Context, op, method, u string, ver *Microversion, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("%s: encode body: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ver != nil {
		req.Header.Set(microversionHeader, ver.String())
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s: read response: %w", op, err)
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, &HTTPError{Op: op, Status: resp.StatusCode, Body: strings.TrimSpace(string(b[:min(len(b), 512)]))}
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: decode response: %w", op, err)
		}
	}
	return resp.StatusCode, nil
}

// maxVersion reads default_version.version from GET / (the controller's
// maximum microversion).
func (c *client) maxVersion(ctx context.Context) (Microversion, error) {
	var root struct {
		DefaultVersion struct {
			Version string `json:"version"`
		} `json:"default_version"`
	}
	if _, err := c.do(ctx, "discover API version", http.MethodGet, c.base+"/", nil, nil, &root); err != nil {
		return Microversion{}, err
	}
	v, err := ParseMicroversion(root.DefaultVersion.Version)
	if err != nil {
		return Microversion{}, fmt.Errorf("discover API version: %w", err)
	}
	return v, nil
}

// lookup is GET /v1/lookup?addresses=…&node_uuid=….
func (c *client) lookup(ctx context.Context, ver Microversion, macs []string, nodeUUID string) (proto.LookupResponse, int, error) {
	q := url.Values{}
	if len(macs) > 0 {
		q.Set("addresses", strings.Join(macs, ","))
	}
	if nodeUUID != "" {
		q.Set("node_uuid", nodeUUID)
	}
	var out proto.LookupResponse
	code, err := c.do(ctx, "lookup", http.MethodGet, c.base+"/v1/lookup?"+q.Encode(), &ver, nil, &out)
	return out, code, err
}

// heartbeat is POST /v1/heartbeat/{uuid}.
func (c *client) heartbeat(ctx context.Context, ver Microversion, uuid string, req proto.HeartbeatRequest) (int, error) {
	return c.do(ctx, "heartbeat", http.MethodPost, c.base+"/v1/heartbeat/"+url.PathEscape(uuid), &ver, req, nil)
}

// inspect posts the inspection data to the callback URL (no microversion header, as IPA).
func (c *client) inspect(ctx context.Context, callbackURL string, req proto.InspectionRequest) (proto.InspectionResponse, int, error) {
	var out proto.InspectionResponse
	code, err := c.do(ctx, "inspection callback", http.MethodPost, callbackURL, nil, req, &out)
	return out, code, err
}
