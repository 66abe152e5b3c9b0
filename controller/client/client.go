// Package client is a small typed client of Kiln's (and Ironic's) /v1 API
// over the proto types, for the kiln CLI and for programs that drive Kiln. It
// pins one microversion, speaks noauth or HTTP basic, and turns Ironic error
// bodies into *APIError carrying the faultstring.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/proto"
)

// Microversion is the API version the client asks for: the one Metal3's
// baremetal-operator pins on Kiln, with every field the CLI shows.
const Microversion = "1.95"

// Options configure a Client.
type Options struct {
	// Username and Password, when Username is set, are sent as HTTP basic
	// credentials (OS_AUTH_TYPE=http_basic); otherwise nothing (noauth).
	Username, Password string
	// CACertFile is a PEM bundle of the CAs that may sign the controller's
	// certificate (OS_CACERT), instead of the system's.
	CACertFile string
	// Insecure skips verifying the controller's certificate (--insecure).
	Insecure bool
	// HTTPClient defaults to one without a timeout (event streams are long)
	// that verifies TLS as CACertFile and Insecure say; when set, those two
	// are ignored.
	HTTPClient *http.Client
}

// Client talks to one controller.
type Client struct {
	base string // scheme://host[:port], without /v1
	opts Options
	hc   *http.Client
}

// New returns a client of the controller at endpoint, with or without a
// trailing /v1 (OS_ENDPOINT usually has none, some setups add it).
func New(endpoint string, opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("invalid endpoint %q: want http(s)://host:port", endpoint)
	}
	base := strings.TrimRight(u.String(), "/")
	base = strings.TrimSuffix(base, "/v1")
	hc := opts.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if opts.CACertFile != "" || opts.Insecure {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: opts.Insecure}
		}
		if opts.CACertFile != "" {
			pem, err := os.ReadFile(opts.CACertFile)
			if err != nil {
				return nil, fmt.Errorf("CA certificate file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA certificate file %s: no PEM certificate in it", opts.CACertFile)
			}
			tr.TLSClientConfig.RootCAs = pool
		}
		hc = &http.Client{Transport: tr}
	}
	return &Client{base: base, opts: opts, hc: hc}, nil
}

// Endpoint is the controller URL (without /v1).
func (c *Client) Endpoint() string { return c.base }

// APIError is an error answer of the API.
type APIError struct {
	Status int
	// Message is Ironic's faultstring (or the body when it is not Ironic's).
	Message string
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	return e.Message
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// faultString extracts the message of an Ironic error body
// {"error_message": "<JSON {faultstring,…}>"} or of a bare WSGI one.
func faultString(body []byte) string {
	var outer struct {
		ErrorMessage json.RawMessage `json:"error_message"`
	}
	if json.Unmarshal(body, &outer) == nil && len(outer.ErrorMessage) > 0 {
		var inner string
		if json.Unmarshal(outer.ErrorMessage, &inner) != nil {
			inner = string(outer.ErrorMessage)
		}
		var e struct {
			FaultString string `json:"faultstring"`
			Description string `json:"description"`
			Title       string `json:"title"`
		}
		if json.Unmarshal([]byte(inner), &e) == nil {
			switch {
			case e.FaultString != "":
				return e.FaultString
			case e.Description != "":
				return e.Description
			case e.Title != "":
				return e.Title
			}
		}
		return inner
	}
	return strings.TrimSpace(string(body))
}

func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set(proto.HeaderOpenStackAPIVersion, "baremetal "+Microversion)
	req.Header.Set(proto.HeaderIronicAPIVersion, Microversion)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "kiln-cli")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.opts.Username != "" {
		req.SetBasicAuth(c.opts.Username, c.opts.Password)
	}
	return req, nil
}

// do sends a request and decodes a 2xx JSON answer into out (if non-nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, c.base+path, err)
	}
	if resp.StatusCode >= 300 {
		return &APIError{Status: resp.StatusCode, Message: faultString(b)}
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, c.base+path, err)
		}
	}
	return nil
}

// NodeQuery filters ListNodes; empty fields do not filter.
type NodeQuery struct {
	ProvisionState, Driver, ResourceClass, ConductorGroup string
	Maintenance                                           *bool
	// Detail asks for every field, not only the default list fields.
	Detail bool
}

// ListNodes lists nodes, following the server's paging.
func (c *Client) ListNodes(ctx context.Context, q NodeQuery) ([]proto.Node, error) {
	v := url.Values{}
	for k, s := range map[string]string{"provision_state": q.ProvisionState, "driver": q.Driver,
		"resource_class": q.ResourceClass, "conductor_group": q.ConductorGroup} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Maintenance != nil {
		v.Set("maintenance", fmt.Sprint(*q.Maintenance))
	}
	path := "/v1/nodes"
	if q.Detail {
		path += "/detail"
	}
	var all []proto.Node
	next := path + "?" + v.Encode()
	for next != "" {
		var page struct {
			Nodes []proto.Node `json:"nodes"`
			Next  string       `json:"next"`
		}
		if err := c.do(ctx, http.MethodGet, next, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Nodes...)
		next = ""
		if page.Next != "" && len(page.Nodes) > 0 {
			u, err := url.Parse(page.Next)
			if err != nil {
				return nil, fmt.Errorf("invalid next link %q: %w", page.Next, err)
			}
			next = u.RequestURI()
		}
	}
	return all, nil
}

// GetNode reads a node by UUID or name.
func (c *Client) GetNode(ctx context.Context, ident string) (*proto.Node, error) {
	var n proto.Node
	if err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(ident), nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// CreateNode creates a node from its JSON fields (driver required).
func (c *Client) CreateNode(ctx context.Context, fields map[string]any) (*proto.Node, error) {
	var n proto.Node
	if err := c.do(ctx, http.MethodPost, "/v1/nodes", fields, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// PatchOp is one RFC 6902 operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// UpdateNode applies a JSON patch.
func (c *Client) UpdateNode(ctx context.Context, ident string, patch []PatchOp) (*proto.Node, error) {
	var n proto.Node
	if err := c.do(ctx, http.MethodPatch, "/v1/nodes/"+url.PathEscape(ident), patch, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// DeleteNode deletes a node.
func (c *Client) DeleteNode(ctx context.Context, ident string) error {
	return c.do(ctx, http.MethodDelete, "/v1/nodes/"+url.PathEscape(ident), nil, nil)
}

// SetProvisionState asks for a provision verb (PUT …/states/provision).
func (c *Client) SetProvisionState(ctx context.Context, ident string, req proto.ProvisionRequest) error {
	return c.do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(ident)+"/states/provision", req, nil)
}

// SetPowerState asks for a power change (PUT …/states/power).
func (c *Client) SetPowerState(ctx context.Context, ident string, req proto.PowerRequest) error {
	return c.do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(ident)+"/states/power", req, nil)
}

// SetBootDevice sets the next boot device.
func (c *Client) SetBootDevice(ctx context.Context, ident string, req proto.BootDeviceRequest) error {
	return c.do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(ident)+"/management/boot_device", req, nil)
}

// GetBootDevice reads the boot device.
func (c *Client) GetBootDevice(ctx context.Context, ident string) (proto.BootDevice, error) {
	var bd proto.BootDevice
	err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(ident)+"/management/boot_device", nil, &bd)
	return bd, err
}

// SetMaintenance puts a node in maintenance with a reason.
func (c *Client) SetMaintenance(ctx context.Context, ident, reason string) error {
	return c.do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(ident)+"/maintenance", proto.MaintenanceRequest{Reason: reason}, nil)
}

// UnsetMaintenance takes a node out of maintenance.
func (c *Client) UnsetMaintenance(ctx context.Context, ident string) error {
	return c.do(ctx, http.MethodDelete, "/v1/nodes/"+url.PathEscape(ident)+"/maintenance", nil, nil)
}

// History lists a node's events, oldest first.
func (c *Client) History(ctx context.Context, ident string) ([]proto.HistoryEvent, error) {
	var out struct {
		History []proto.HistoryEvent `json:"history"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(ident)+"/history?detail=true", nil, &out)
	return out.History, err
}

// Inventory is the body of GET …/inventory.
type Inventory struct {
	Inventory  json.RawMessage `json:"inventory"`
	PluginData json.RawMessage `json:"plugin_data"`
}

// GetInventory reads the node's inspection data.
func (c *Client) GetInventory(ctx context.Context, ident string) (*Inventory, error) {
	var inv Inventory
	if err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(ident)+"/inventory", nil, &inv); err != nil {
		return nil, err
	}
	return &inv, nil
}

// ListPorts lists ports with every field, of one node when node is set.
func (c *Client) ListPorts(ctx context.Context, node string) ([]proto.Port, error) {
	path := "/v1/ports/detail"
	if node != "" {
		path = "/v1/nodes/" + url.PathEscape(node) + "/ports/detail"
	}
	var out struct {
		Ports []proto.Port `json:"ports"`
	}
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Ports, err
}

// CreatePort creates a port from its JSON fields (address, node_uuid).
func (c *Client) CreatePort(ctx context.Context, fields map[string]any) (*proto.Port, error) {
	var p proto.Port
	if err := c.do(ctx, http.MethodPost, "/v1/ports", fields, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// GetPort reads a port by UUID.
func (c *Client) GetPort(ctx context.Context, uuid string) (*proto.Port, error) {
	var p proto.Port
	if err := c.do(ctx, http.MethodGet, "/v1/ports/"+url.PathEscape(uuid), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeletePort deletes a port.
func (c *Client) DeletePort(ctx context.Context, uuid string) error {
	return c.do(ctx, http.MethodDelete, "/v1/ports/"+url.PathEscape(uuid), nil, nil)
}

// ListDrivers lists the enabled hardware types.
func (c *Client) ListDrivers(ctx context.Context) ([]proto.Driver, error) {
	var out struct {
		Drivers []proto.Driver `json:"drivers"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/drivers", nil, &out)
	return out.Drivers, err
}

// StreamMessage is one message of the event stream: Kind "node" carries
// Event, Kind "lost" says Dropped events were lost.
type StreamMessage struct {
	Kind    string
	Event   events.Event
	Dropped uint64
}

// Events follows GET /v1/events for the given nodes (all if none), calling
// fn with each message until ctx ends, fn returns an error (returned as is),
// or the stream breaks (an error). Kiln only: Ironic has no such stream.
func (c *Client) Events(ctx context.Context, nodes []string, fn func(StreamMessage) error) error {
	v := url.Values{}
	for _, n := range nodes {
		v.Add("node", n)
	}
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/events?"+v.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("follow events: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return &APIError{Status: resp.StatusCode, Message: faultString(b)}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var kind string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if kind != "" || len(data) > 0 {
				m := StreamMessage{Kind: kind}
				switch kind {
				case "node":
					if err := json.Unmarshal(data, &m.Event); err != nil {
						return fmt.Errorf("decode event %q: %w", data, err)
					}
				case "lost":
					var l struct {
						Dropped uint64 `json:"dropped"`
					}
					_ = json.Unmarshal(data, &l)
					m.Dropped = l.Dropped
				}
				if err := fn(m); err != nil {
					return err
				}
			}
			kind, data = "", nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			kind = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("follow events: %w", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("follow events: the controller closed the stream")
}
