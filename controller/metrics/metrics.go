// Package metrics exposes the controller's Prometheus metrics: nodes by
// state (read from the store at scrape time), flow and step durations and
// image bytes written (derived from node changes), BMC requests by hardware
// type (drivers report them through driver.ObserveBMC), agent heartbeat age
// and API latency by route. Everything registers on the Registerer handed to
// New, never on the global one.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Metrics holds the controller's metrics. Its methods are safe for
// concurrent use.
type Metrics struct {
	flowDuration *prometheus.HistogramVec
	stepDuration *prometheus.HistogramVec
	transitions  *prometheus.CounterVec
	bmcRequests  *prometheus.CounterVec
	bmcErrors    *prometheus.CounterVec
	apiDuration  *prometheus.HistogramVec
	imageBytes   prometheus.Counter

	now func() time.Time

	mu    sync.Mutex
	flows map[string]flowStart // node UUID → running flow
	steps map[string]stepStart // node UUID → running step
}

type flowStart struct {
	verb      string
	at        time.Time
	lastError string
}

type stepStart struct {
	step string
	at   time.Time
}

// New builds the metrics and registers them, with a collector that reads
// node counts and agent heartbeat ages from st at each scrape, on reg.
func New(reg prometheus.Registerer, st store.Store) *Metrics {
	m := &Metrics{
		flowDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kiln_flow_duration_seconds",
			Help:    "Time from a provision request to the node's next stable or failed state, by verb and result (success, failed).",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}, []string{"verb", "result"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kiln_step_duration_seconds",
			Help:    "Duration of clean, deploy and service steps, by step (interface.step) and result.",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"step", "result"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_node_transitions_total",
			Help: "Provision state changes, by the state entered.",
		}, []string{"to"}),
		bmcRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_bmc_requests_total",
			Help: "Requests made to BMCs, by hardware type.",
		}, []string{"driver"}),
		bmcErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_bmc_request_errors_total",
			Help: "BMC requests that failed, by hardware type.",
		}, []string{"driver"}),
		apiDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kiln_api_request_duration_seconds",
			Help:    "API request latency by method, route and status code.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}, []string{"method", "route", "code"}),
		imageBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kiln_image_bytes_written_total",
			Help: "Image bytes the agents reported written to disk (from step progress).",
		}),
		now:   time.Now,
		flows: map[string]flowStart{},
		steps: map[string]stepStart{},
	}
	reg.MustRegister(m.flowDuration, m.stepDuration, m.transitions, m.bmcRequests, m.bmcErrors, m.apiDuration, m.imageBytes)
	if st != nil {
		reg.MustRegister(&nodeCollector{st: st, now: time.Now})
		if c, ok := store.WriteCounterOf(st); ok {
			reg.MustRegister(writesCollector{c})
		}
	}
	return m
}

// ObserveBMCRequest counts one BMC request; it makes *Metrics a
// driver.BMCObserver.
func (m *Metrics) ObserveBMCRequest(driver, _ string, err error) {
	m.bmcRequests.WithLabelValues(driver).Inc()
	if err != nil {
		m.bmcErrors.WithLabelValues(driver).Inc()
	}
}

// Observe derives flow and step durations, transitions and image bytes from
// one node change; it is an events.Observer.
func (m *Metrics) Observe(c events.Change) {
	now := m.now()
	b, a := c.Before, c.After
	m.mu.Lock()
	defer m.mu.Unlock()
	if a.Deleted {
		delete(m.flows, a.UUID)
		delete(m.steps, a.UUID)
		return
	}
	if b.UUID != "" && b.ProvisionState != a.ProvisionState {
		m.transitions.WithLabelValues(string(a.ProvisionState)).Inc()
	}
	failed := state.IsFailed(a.ProvisionState)

	// Image bytes: what the progress grew by, and at the end of a step
	// whose last report fell short of the total, the remainder.
	if a.Progress != nil && (b.Progress == nil || b.Progress.Step != a.Progress.Step) {
		m.imageBytes.Add(float64(a.Progress.BytesDone))
	} else if a.Progress != nil && b.Progress != nil && a.Progress.BytesDone > b.Progress.BytesDone {
		m.imageBytes.Add(float64(a.Progress.BytesDone - b.Progress.BytesDone))
	}
	if p := b.Progress; p != nil && p.Step == b.Step && a.Step != b.Step && !failed && p.BytesTotal > p.BytesDone {
		m.imageBytes.Add(float64(p.BytesTotal - p.BytesDone))
	}

	// Steps.
	if cur, ok := m.steps[a.UUID]; ok && cur.step != a.Step {
		result := "success"
		if failed {
			result = "failed"
		}
		m.stepDuration.WithLabelValues(cur.step, result).Observe(now.Sub(cur.at).Seconds())
		delete(m.steps, a.UUID)
	}
	if _, ok := m.steps[a.UUID]; !ok && a.Step != "" {
		m.steps[a.UUID] = stepStart{step: a.Step, at: now}
	}

	// Flows: from entering a transient state to leaving them all.
	running, ok := m.flows[a.UUID]
	switch {
	case !ok && state.IsTransient(a.ProvisionState):
		verb := string(a.ProvisionState)
		if fs, _ := flowstate.Read(c.Node, flowstate.PartWork); fs.Request != nil && fs.Request.Verb != "" {
			verb = fs.Request.Verb
		}
		m.flows[a.UUID] = flowStart{verb: verb, at: now, lastError: deref(b.LastError)}
	case ok && !state.IsTransient(a.ProvisionState):
		result := "success"
		if failed || (a.LastError != nil && *a.LastError != running.lastError) {
			result = "failed"
		}
		m.flowDuration.WithLabelValues(running.verb, result).Observe(now.Sub(running.at).Seconds())
		delete(m.flows, a.UUID)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Middleware measures API latency by route template (never by raw path, so
// the label set stays small) and status code.
func (m *Metrics) Middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Path() == "/v1/events" {
				return next(c) // a stream: its duration is the client's choice
			}
			start := time.Now()
			err := next(c)
			if err != nil {
				// Render the error now, so its status is known.
				c.Error(err)
			}
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			code := c.Response().Status
			m.apiDuration.WithLabelValues(c.Request().Method, route, strconv.Itoa(code)).Observe(time.Since(start).Seconds())
			return nil
		}
	}
}

// nodeCollector reads the store at each scrape.
type nodeCollector struct {
	st  store.Store
	now func() time.Time
}

var (
	nodesDesc = prometheus.NewDesc("kiln_nodes",
		"Nodes by provision state, power state and maintenance.", []string{"provision_state", "power_state", "maintenance"}, nil)
	heartbeatAgeDesc = prometheus.NewDesc("kiln_agent_heartbeat_age_seconds",
		"Seconds since the last heartbeat of each node's running agent (nodes with an agent only).", []string{"node"}, nil)
)

func (nc *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodesDesc
	ch <- heartbeatAgeDesc
}

func (nc *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	counts, beats, err := store.NodeGauges(ctx, nc.st)
	if err != nil && ctx.Err() == nil {
		// A store that is not SQL (a test's): read every node.
		counts, beats, err = nodeGaugesOf(ctx, nc.st)
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(nodesDesc, err)
		return
	}
	now := nc.now()
	for _, b := range beats {
		ch <- prometheus.MustNewConstMetric(heartbeatAgeDesc, prometheus.GaugeValue, now.Sub(b.Last).Seconds(), b.UUID)
	}
	for _, c := range counts {
		power := c.PowerState
		if power == "" {
			power = "None"
		}
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(c.Count),
			c.ProvisionState, power, strconv.FormatBool(c.Maintenance))
	}
}

// nodeGaugesOf is store.NodeGauges computed from every node, decoded.
func nodeGaugesOf(ctx context.Context, st store.Store) ([]store.NodeCount, []store.AgentBeat, error) {
	nodes, err := st.ListNodes(ctx, store.NodeQuery{})
	if err != nil {
		return nil, nil, err
	}
	type key struct {
		prov, power string
		maint       bool
	}
	index := map[key]int{}
	var counts []store.NodeCount
	var beats []store.AgentBeat
	for _, n := range nodes {
		k := key{prov: string(n.ProvisionState), maint: n.Maintenance}
		if n.PowerState != nil {
			k.power = string(*n.PowerState)
		}
		i, ok := index[k]
		if !ok {
			i = len(counts)
			index[k] = i
			counts = append(counts, store.NodeCount{ProvisionState: k.prov, PowerState: k.power, Maintenance: k.maint})
		}
		counts[i].Count++
		if fs, _ := flowstate.Read(n, flowstate.PartAgent); !fs.Agent.LastHeartbeat.IsZero() {
			beats = append(beats, store.AgentBeat{UUID: n.UUID, Last: fs.Agent.LastHeartbeat})
		}
	}
	return counts, beats, nil
}

func parseTime(s string) (time.Time, error) {
	var t proto.Time
	if err := t.UnmarshalJSON([]byte(strconv.Quote(s))); err != nil {
		return time.Time{}, err
	}
	return t.Time, nil
}

// Handler is the /metrics endpoint for g.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttpHandler(g)
}
