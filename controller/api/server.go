// Package api serves Kiln's Ironic-compatible REST API (/v1) over echo. It
// validates requests, negotiates microversions, renders Ironic's JSON shapes and
// records what clients ask for in the store; it never talks to hardware. The
// conductor acts on what the API records.
package api

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/controller/ratelimit"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Config is what the API needs from the process that hosts it.
type Config struct {
	Store store.Store
	// Conductor is this process's conductor name, shown in GET /v1/drivers hosts.
	Conductor string
	Logger    *slog.Logger
	// Notify, when set, is called with a node's UUID after the API recorded
	// work for it (a provision, power or boot-device request, an agent
	// heartbeat), so the conductor acts at once instead of at its next scan.
	Notify func(nodeUUID string)
	// NotifyAgent, when set, is Notify for an agent heartbeat the
	// conductor must act on: its agent waits for the next command.
	NotifyAgent func(nodeUUID string)
	// AgentHeartbeated, when set, is called after every heartbeat the
	// API accepts, acted on or not: a conductor waiting on one of the
	// agent's commands looks at it then (an agent heartbeats as soon as
	// an asynchronous command ends).
	AgentHeartbeated func(nodeUUID string)
	// AgentHeartbeatTimeout is the heartbeat_timeout handed to agents at
	// lookup [60s].
	AgentHeartbeatTimeout time.Duration
	// Events, when set, serves GET /v1/events (node changes as server-sent
	// events) from this bus.
	Events *events.Bus
	// AgentLimit limits /v1/lookup and /v1/continue_inspection per source
	// address; nil: DefaultAgentLimit (see agent_guard.go).
	AgentLimit *ratelimit.Limiter
	// ConductorWait bounds how long a boot-device request waits for the
	// node's conductor to answer [40s].
	ConductorWait time.Duration
	// LockWait bounds how long a request waits for a conductor to release
	// the node before answering 409 NodeLocked [DefaultLockWait]; negative:
	// answer at once.
	LockWait time.Duration
	// BodyLimits overrides DefaultBodyLimits, per route class.
	BodyLimits map[string]int64
	// Discovery, when set, enrolls machines whose inspection data matches
	// no node (see discovery.go); nil answers 404 as before.
	Discovery *Discovery
	// NotifyAllocation, when set, is called with a new allocation's UUID so
	// that a conductor processes it at once instead of at its next scan.
	NotifyAllocation func(uuid string)
}

// Server is the /v1 API. It is an http.Handler.
type Server struct {
	store                 store.Store
	conductor             string
	log                   *slog.Logger
	echo                  *echo.Echo
	notifier              func(string)
	notifyAgent           func(string)
	agentHeartbeated      func(string)
	agentHeartbeatTimeout time.Duration
	clock                 func() time.Time // heartbeats' time when set (tests); time.Now otherwise
	events                *events.Bus
	agentLimit            *ratelimit.Limiter
	conductorWait         time.Duration
	lockWait              time.Duration
	bodyLimits            map[string]int64
	// chassis serves /v1/chassis; chassisErr is why it cannot (a Store
	// that is not SQL), answered as 503 there.
	chassis    *resource[proto.Chassis]
	chassisErr error
	discovery  *Discovery
	// steps serves deploy templates, runbooks and volume (templates.go).
	steps stepResources
	// allocations serves /v1/allocations (allocations.go).
	allocations      *resource[proto.Allocation]
	allocationsErr   error
	notifyAllocation func(string)
	// portgroups serves /v1/portgroups, as chassis does /v1/chassis.
	portgroups    *resource[proto.Portgroup]
	portgroupsErr error
	// hardware serves nodes' /bios and /firmware (hardware.go).
	hardware    *store.NodeHardware
	hardwareErr error
	// inspectionRules serves /v1/inspection_rules (inspectionrules.go).
	inspectionRules    *resource[proto.InspectionRule]
	inspectionRulesErr error
	// views keeps node renderings for /detail (nodeviewcache.go).
	views viewCache
}

// New builds the API with every route mounted. It panics on an invalid
// BodyLimits; CheckBodyLimits validates them first.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AgentHeartbeatTimeout <= 0 {
		cfg.AgentHeartbeatTimeout = time.Minute
	}
	if cfg.ConductorWait <= 0 {
		cfg.ConductorWait = 40 * time.Second
	}
	if cfg.LockWait == 0 {
		cfg.LockWait = DefaultLockWait
	}
	s := &Server{store: cfg.Store, conductor: cfg.Conductor, log: cfg.Logger, notifier: cfg.Notify, agentHeartbeatTimeout: cfg.AgentHeartbeatTimeout, events: cfg.Events,
		conductorWait: cfg.ConductorWait, lockWait: cfg.LockWait, discovery: cfg.Discovery, notifyAllocation: cfg.NotifyAllocation,
		notifyAgent: cfg.NotifyAgent, agentHeartbeated: cfg.AgentHeartbeated}
	s.agentLimit = agentLimiter(cfg.AgentLimit)
	limits, err := bodyLimits(cfg.BodyLimits)
	if err != nil {
		panic(err)
	}
	s.bodyLimits = limits
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Pre(defaultVersion)
	e.Use(s.middleware)
	e.Use(s.screenRequest)
	s.echo = e
	s.routes()
	return s
}

// ServeHTTP makes the API an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Echo exposes the router so that other layers (agent endpoints, boot files)
// can mount their routes beside /v1.
func (s *Server) Echo() *echo.Echo { return s.echo }

const ctxMinor = "kiln.minor"

// minor returns the negotiated microversion's minor number.
func minor(c echo.Context) int {
	if v, ok := c.Get(ctxMinor).(int); ok {
		return v
	}
	return DefaultMinor
}

// middleware negotiates the microversion and stamps the version headers and a
// request ID on every response, including errors.
func (s *Server) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set(proto.HeaderMinVersion, versionString(MinMinor))
		h.Set(proto.HeaderMaxVersion, versionString(MaxMinor))
		// Ironic sends the request ID under both names (the second since 1.107).
		rid := "req-" + uuid.NewString()
		h.Set("Openstack-Request-Id", rid)
		h.Set("X-Openstack-Request-Id", rid)
		v, err := parseMicroversion(c.Request().Header)
		if err != nil {
			return &Error{Code: http.StatusNotAcceptable, Msg: err.Error(), bare: true}
		}
		h.Set(proto.HeaderIronicAPIVersion, versionString(v))
		h.Set("Vary", proto.HeaderOpenStackAPIVersion+", "+proto.HeaderIronicAPIVersion)
		c.Set(ctxMinor, v)
		return next(c)
	}
}

func (s *Server) routes() {
	e := s.echo
	e.GET("/", s.getRoot)
	e.GET("/v1", s.getV1)
	e.GET("/v1/", s.getV1)

	e.GET("/v1/nodes", s.listNodes)
	e.GET("/v1/nodes/", s.listNodes)
	e.GET("/v1/nodes/detail", s.listNodesDetail)
	e.POST("/v1/nodes", s.createNode)
	e.DELETE("/v1/nodes", s.deleteCollection)
	e.GET("/v1/nodes/:node", s.getNode)
	e.PATCH("/v1/nodes/:node", s.patchNode)
	e.DELETE("/v1/nodes/:node", s.deleteNode)
	e.GET("/v1/nodes/:node/states", s.getStates)
	e.PUT("/v1/nodes/:node/states/provision", s.setProvisionState)
	e.PUT("/v1/nodes/:node/states/power", s.setPowerState)
	e.GET("/v1/nodes/:node/management/boot_device", s.getBootDevice)
	e.PUT("/v1/nodes/:node/management/boot_device", s.setBootDevice)
	e.GET("/v1/nodes/:node/management/boot_device/supported", s.getSupportedBootDevices)
	s.mountVirtualMedia(e)
	e.PUT("/v1/nodes/:node/maintenance", s.setMaintenance)
	e.DELETE("/v1/nodes/:node/maintenance", s.unsetMaintenance)
	e.GET("/v1/nodes/:node/validate", s.validateNode)
	e.GET("/v1/nodes/:node/history", s.listHistory)
	e.GET("/v1/nodes/:node/history/:event", s.getHistoryEvent)
	e.GET("/v1/nodes/:node/inventory", s.getInventory)
	e.GET("/v1/nodes/:node/ports", s.listNodePorts)
	e.GET("/v1/nodes/:node/ports/detail", s.listNodePortsDetail)
	s.mountTraits(e)
	e.GET("/v1/nodes/:node/children", s.nodeChildren)
	e.GET("/v1/shards", s.listShards)

	e.GET("/v1/ports", s.listPorts)
	e.GET("/v1/ports/", s.listPorts)
	e.GET("/v1/ports/detail", s.listPortsDetail)
	e.POST("/v1/ports", s.createPort)
	e.DELETE("/v1/ports", s.deleteCollection)
	e.GET("/v1/ports/:port", s.getPort)
	e.PATCH("/v1/ports/:port", s.patchPort)
	e.DELETE("/v1/ports/:port", s.deletePort)

	e.GET("/v1/lookup", s.lookup)
	e.POST("/v1/heartbeat/:node", s.heartbeat)
	e.POST("/v1/continue_inspection", s.continueInspection)

	e.GET("/v1/drivers", s.listDrivers)
	e.GET("/v1/drivers/", s.listDrivers)
	e.GET("/v1/drivers/:driver", s.getDriver)
	e.GET("/v1/conductors", s.listConductors)
	s.subresourceRoutes(e)
	if s.events != nil {
		e.GET("/v1/events", s.streamEvents)
	}
	ch := chassisAPI
	s.chassis = &ch
	var chStore *store.Resources[proto.Chassis]
	chStore, s.chassisErr = store.NewResources(s.store, store.ChassisResource)
	s.chassis.mount(e, chStore, s.chassisErr)
	e.GET("/v1/chassis/:id/nodes", s.chassisNodes(false))
	e.GET("/v1/chassis/:id/nodes/detail", s.chassisNodes(true))
	s.mountStepResources(e)
	s.mountInspectionRules(e)
	s.mountAllocations(e)
	s.routePortgroups(e)
	s.mountHardware(e)
	s.mountManagementOps(e) // mgmtops.go
}

// baseURL is the scheme and host clients reached us at; links are built on it.
func baseURL(c echo.Context) string {
	return c.Scheme() + "://" + c.Request().Host
}

func links(c echo.Context, path string) []proto.Link {
	base := baseURL(c)
	return []proto.Link{
		{Href: base + "/v1/" + path, Rel: "self"},
		{Href: base + "/" + path, Rel: "bookmark"},
	}
}

func (s *Server) getRoot(c echo.Context) error {
	v := s.version(c)
	return c.JSON(http.StatusOK, proto.Root{
		Name:           "Kiln",
		Description:    "Kiln provisions bare-metal servers through an OpenStack Ironic compatible API.",
		DefaultVersion: v,
		Versions:       []proto.Version{v},
	})
}

func (s *Server) version(c echo.Context) proto.Version {
	return proto.Version{
		ID:         "v1",
		Links:      []proto.Link{{Href: baseURL(c) + "/v1/", Rel: "self"}},
		Status:     "CURRENT",
		MinVersion: versionString(MinMinor),
		Version:    versionString(MaxMinor),
	}
}

func (s *Server) getV1(c echo.Context) error {
	base := baseURL(c)
	coll := func(name string) []proto.Link {
		return []proto.Link{{Href: base + "/v1/" + name + "/", Rel: "self"}, {Href: base + "/" + name + "/", Rel: "bookmark"}}
	}
	doc := proto.V1{
		ID: "v1",
		Links: []proto.Link{
			{Href: base + "/v1/", Rel: "self"},
			{Href: "https://docs.openstack.org//ironic/latest/contributor//webapi.html", Rel: "describedby", Type: "text/html"},
		},
		MediaTypes: proto.MediaTypes{Base: "application/json", Type: "application/vnd.openstack.ironic.v1+json"},
		Chassis:    coll("chassis"),
		Nodes:      coll("nodes"),
		Ports:      coll("ports"),
		Drivers:    coll("drivers"),
		Version:    s.version(c),
	}
	// Collections appear in the document from the microversion that added them.
	for _, l := range []struct {
		minor int
		dst   *[]proto.Link
		name  string
	}{
		{22, &doc.Lookup, "lookup"}, {22, &doc.Heartbeat, "heartbeat"}, {23, &doc.Portgroups, "portgroups"},
		{32, &doc.Volume, "volume"}, {49, &doc.Conductors, "conductors"}, {52, &doc.Allocations, "allocations"},
		{54, &doc.Events, "events"}, {55, &doc.DeployTemplates, "deploy_templates"}, {82, &doc.Shards, "shards"},
		{92, &doc.Runbooks, "runbooks"}, {96, &doc.InspectionRules, "inspection_rules"},
	} {
		if minor(c) >= l.minor {
			*l.dst = coll(l.name)
		}
	}
	return c.JSON(http.StatusOK, doc)
}

func (s *Server) deleteCollection(c echo.Context) error {
	name := "node_ident"
	if strings.HasPrefix(c.Path(), "/v1/ports") {
		name = "port_uuid"
	}
	return badRequest("Missing mandatory parameter: %s", name)
}

func (s *Server) emptyCollection(name string) echo.HandlerFunc {
	return func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]any{name: []any{}})
	}
}
