package redfish

import (
	"container/list"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/kilnhq/kiln/proto"
)

// Pool keeps one connection per BMC account (address + user): the gofish
// client, the service root, the cached session and the per-BMC limits. Every
// node whose driver_info names that account shares it, so a controller
// holds at most one session per BMC however many operations run.
//
// What it holds is bounded whatever the fleet's size: the connections share
// one HTTP transport per TLS setting, which keeps at most maxIdleSockets
// idle sockets in all (closing the least recently used), and the pool keeps
// at most maxConns accounts, forgetting (and logging out of) the least
// recently used one beyond that and any unused for connIdle. An account
// forgotten while an operation still runs on it finishes that operation.
type Pool struct {
	limits Limits
	log    *slog.Logger
	// hwType labels the pool's requests in the BMC metrics; forced are
	// quirks applied whatever the BMC reports (a vendor variant's).
	hwType string
	forced []Quirk

	maxConns int
	connIdle time.Duration
	now      func() time.Time

	mu     sync.Mutex
	conns  map[string]*list.Element // of *conn, most recently used first
	lru    list.List
	bases  map[string]*http.Transport // by TLS setting
	closed bool
}

// Bounds of a pool (see Pool): accounts kept, how long an unused one is
// kept, idle sockets kept across all BMCs. Ironic's connection cache keeps
// 1,000 accounts; a conductor syncing power every minute reuses each of its
// BMCs' accounts well within connIdle.
const (
	defaultMaxConns = 4096
	defaultConnIdle = 10 * time.Minute
	maxIdleSockets  = 256
)

// NewPool returns an empty pool whose connections obey l; a nil log means
// slog.Default() at the time of each message.
func NewPool(l Limits, log *slog.Logger) *Pool {
	return &Pool{limits: l, log: log, conns: map[string]*list.Element{}, bases: map[string]*http.Transport{},
		maxConns: defaultMaxConns, connIdle: defaultConnIdle, now: time.Now}
}

// Close logs out every cached session and forgets the connections. The pool
// stays usable: a later operation opens new sessions.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	var conns []*conn
	for e := p.lru.Front(); e != nil; e = e.Next() {
		conns = append(conns, e.Value.(*conn))
	}
	p.conns = map[string]*list.Element{}
	p.lru.Init()
	p.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	sem := make(chan struct{}, 32)
	for _, c := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.tr.logout(ctx); err != nil {
				emu.Lock()
				errs = append(errs, fmt.Errorf("log out of %s: %w", c.endpoint, err))
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.mu.Lock()
	for _, b := range p.bases {
		b.CloseIdleConnections()
	}
	p.mu.Unlock()
	return errors.Join(errs...)
}

// Sessions returns how many connections hold a session (for tests and metrics).
func (p *Pool) Sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for e := p.lru.Front(); e != nil; e = e.Next() {
		c := e.Value.(*conn)
		c.tr.mu.Lock()
		if c.tr.token != "" {
			n++
		}
		c.tr.mu.Unlock()
	}
	return n
}

// conn is one BMC account's connection.
type conn struct {
	key      string
	endpoint string
	tr       *transport
	lastUsed time.Time // under Pool.mu
	http     *http.Client

	bootMu sync.Mutex // serializes read-modify-write of boot overrides

	mu      sync.Mutex
	api     *gofish.APIClient
	vendor  Vendor
	systems map[string]string // configured system ID ("" = the only one) → path
}

func (p *Pool) conn(in Info) (*conn, error) {
	// One connection per account; TLS settings are part of its identity.
	key := fmt.Sprintf("%s\x00%s\x00%v\x00%s", in.Endpoint, in.Username, in.VerifyCA, in.CAFile)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if e, ok := p.conns[key]; ok {
		c := e.Value.(*conn)
		c.lastUsed = now
		p.lru.MoveToFront(e)
		c.tr.setCredentials(in.Username, in.Password, in.AuthType) // never blocks long: logins hold loginMu
		return c, nil
	}
	base, err := p.base(in)
	if err != nil {
		return nil, err
	}
	l := p.limits.withDefaults()
	tr := newTransport(base, in.Endpoint, in.Username, in.Password, in.AuthType, l, p.log)
	tr.hwType = p.hwType
	c := &conn{key: key, endpoint: in.Endpoint, tr: tr, http: &http.Client{Transport: tr}, systems: map[string]string{}, lastUsed: now}
	p.conns[key] = p.lru.PushFront(c)
	p.evict(now)
	return c, nil
}

// evict forgets the accounts beyond maxConns and those unused for
// connIdle, least recently used first, and logs out of their sessions in
// the background. Called with p.mu held.
func (p *Pool) evict(now time.Time) {
	for e := p.lru.Back(); e != nil; e = p.lru.Back() {
		c := e.Value.(*conn)
		if p.lru.Len() <= p.maxConns && now.Sub(c.lastUsed) < p.connIdle {
			return
		}
		p.lru.Remove(e)
		delete(p.conns, c.key)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.tr.limits.RequestTimeout)
			defer cancel()
			if err := c.tr.logout(ctx); err != nil {
				c.tr.logger().Warn("log out of an unused BMC session", "bmc", c.endpoint, "err", err)
			}
		}()
	}
}

// base returns the HTTP transport shared by the connections with in's TLS
// setting. Called with p.mu held.
func (p *Pool) base(in Info) (*http.Transport, error) {
	key := fmt.Sprintf("%v\x00%s", in.VerifyCA, in.CAFile)
	if b, ok := p.bases[key]; ok {
		return b, nil
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !in.VerifyCA} //nolint:gosec // operator's choice (redfish_verify_ca=false), as BMCs ship self-signed certificates
	if in.CAFile != "" {
		pem, err := os.ReadFile(in.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read redfish_verify_ca bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redfish_verify_ca bundle %s holds no PEM certificate", in.CAFile)
		}
		tlsConf.RootCAs = pool
	}
	b := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        maxIdleSockets,
		MaxIdleConnsPerHost: p.limits.withDefaults().Concurrency,
		IdleConnTimeout:     60 * time.Second,
	}
	p.bases[key] = b
	return b, nil
}

// client returns the gofish client bound to ctx, reading the service root
// on first use.
func (c *conn) client(ctx context.Context) (*gofish.APIClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.api == nil {
		api, err := gofish.ConnectContext(ctx, gofish.ClientConfig{
			Endpoint: c.endpoint, HTTPClient: c.http, ReuseConnections: true,
			NoModifyTransport: true, MaxConcurrentRequests: int64(c.tr.limits.Concurrency),
		})
		if err != nil {
			return nil, c.fail("read the service root", err)
		}
		c.api = api
		if api.Service != nil {
			c.vendor.Vendor, c.vendor.Product = api.Service.Vendor, api.Service.Product
		}
	}
	return c.api.WithContext(ctx), nil
}

// fail names the BMC and the step in err, keeping a BMCError's own text
// (which already names BMC, request and answer).
func (c *conn) fail(what string, err error) error {
	var be *BMCError
	if errors.As(err, &be) {
		return fmt.Errorf("%s: %w", what, be)
	}
	return fmt.Errorf("BMC %s: %s: %w", c.endpoint, what, err)
}

// session is one operation on one node: the connection, the bound client
// and the node's system.
type session struct {
	*conn
	pool *Pool
	info Info
	api  *gofish.APIClient
	node *proto.Node
}

func (p *Pool) open(ctx context.Context, n *proto.Node) (*session, error) {
	in, err := ParseInfo(n)
	if err != nil {
		return nil, err
	}
	c, err := p.conn(in)
	if err != nil {
		return nil, err
	}
	api, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	return &session{conn: c, pool: p, info: in, api: api, node: n}, nil
}

// system reads the node's ComputerSystem (fresh: its ETag guards PATCHes).
func (s *session) system() (*schemas.ComputerSystem, error) {
	path, err := s.systemPath()
	if err != nil {
		return nil, err
	}
	sys, err := schemas.GetObject[schemas.ComputerSystem](s.api, path)
	if err != nil {
		var be *BMCError
		if errors.As(err, &be) && be.Status == http.StatusNotFound && s.info.SystemID != "" {
			return nil, fmt.Errorf("BMC %s has no system %s (driver_info redfish_system_id): %w", s.endpoint, s.info.SystemID, be)
		}
		return nil, s.fail("read system "+path, err)
	}
	s.mu.Lock()
	if s.vendor.Manufacturer == "" {
		s.vendor.Manufacturer, s.vendor.Model = sys.Manufacturer, sys.Model
	}
	s.mu.Unlock()
	return sys, nil
}

// systemPath resolves the configured system: the given ID, or the only
// system of the service (cached).
func (s *session) systemPath() (string, error) {
	if p := s.info.systemPath(); p != "" {
		return p, nil
	}
	s.mu.Lock()
	p, ok := s.systems[""]
	s.mu.Unlock()
	if ok {
		return p, nil
	}
	root := s.api.Service
	systems, err := root.Systems()
	if err != nil {
		return "", s.fail("list systems", err)
	}
	switch len(systems) {
	case 0:
		return "", fmt.Errorf("BMC %s lists no systems", s.endpoint)
	case 1:
	default:
		var ids []string
		for _, x := range systems {
			ids = append(ids, x.ODataID)
		}
		return "", fmt.Errorf("BMC %s has %d systems (%s): set driver_info redfish_system_id to one of them", s.endpoint, len(systems), strings.Join(ids, ", "))
	}
	s.mu.Lock()
	s.systems[""] = systems[0].ODataID
	s.mu.Unlock()
	return systems[0].ODataID, nil
}

// quirks returns the quirks that apply to this BMC: those its identity
// calls for and those its hardware type always applies.
func (s *session) quirks() []Quirk {
	s.mu.Lock()
	v := s.vendor
	s.mu.Unlock()
	q := QuirksFor(v)
	for _, f := range s.pool.forced {
		if !slices.ContainsFunc(q, func(x Quirk) bool { return x.Name == f.Name }) {
			q = append(q, f)
		}
	}
	return q
}
