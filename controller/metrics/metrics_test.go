package metrics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, newStore(t))
	// Touch every vector so each family is gathered.
	m.ObserveBMCRequest("fake-hardware", "power", errors.New("x"))
	m.flowDuration.WithLabelValues("manage", "success").Observe(1)
	m.stepDuration.WithLabelValues("deploy.write_image", "success").Observe(1)
	m.transitions.WithLabelValues("active").Inc()
	m.apiDuration.WithLabelValues("GET", "/v1/nodes", "200").Observe(0.01)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// fakeClock advances by one second at each reading.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

func TestFlowsStepsAndImageBytesFollowNodeChanges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, nil)
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	m.now = clk.now
	const u = "0e6969d5-eb31-4a27-95ab-cfe93f22d4a0"
	var prev events.Event
	step := func(s proto.ProvisionState, target proto.ProvisionState, stepName string, p *events.Progress, lastErr string, verb string) {
		e := events.Event{UUID: u, ProvisionState: s, Step: stepName, Progress: p}
		if target != "" {
			e.TargetProvisionState = &target
		}
		if lastErr != "" {
			e.LastError = &lastErr
		}
		n := &proto.Node{UUID: u, DriverInternalInfo: proto.Dict{}}
		if verb != "" {
			n.DriverInternalInfo[proto.InfoRequest] = map[string]any{"verb": verb}
		}
		m.Observe(events.Change{Before: prev, After: e, Node: n})
		prev = e
	}
	wi := "deploy.write_image"
	step(proto.StateAvailable, "", "", nil, "", "")
	step(proto.StateDeploying, proto.StateActive, "", nil, "", "active")
	step(proto.StateDeployWait, proto.StateActive, wi, nil, "", "")
	step(proto.StateDeployWait, proto.StateActive, wi, &events.Progress{Step: wi, BytesDone: 100, BytesTotal: 1000}, "", "")
	step(proto.StateDeployWait, proto.StateActive, wi, &events.Progress{Step: wi, BytesDone: 600, BytesTotal: 1000}, "", "")
	step(proto.StateDeploying, proto.StateActive, "deploy.boot_instance", &events.Progress{Step: wi, BytesDone: 600, BytesTotal: 1000}, "", "")
	step(proto.StateActive, "", "", nil, "", "")
	// A failed manage: enroll → verifying → enroll with last_error.
	step(proto.StateEnroll, "", "", nil, "", "")
	step(proto.StateVerifying, proto.StateManageable, "", nil, "", "manage")
	step(proto.StateEnroll, "", "", nil, "bad credentials", "")

	if got := testutil.ToFloat64(m.imageBytes); got != 1000 {
		t.Errorf("image bytes = %v, want 1000 (100 + 500 + the 400 after the last report)", got)
	}
	if got := testutil.ToFloat64(m.transitions.WithLabelValues("active")); got != 1 {
		t.Errorf("transitions to active = %v", got)
	}
	expect := `
# HELP kiln_flow_duration_seconds Time from a provision request to the node's next stable or failed state, by verb and result (success, failed).
# TYPE kiln_flow_duration_seconds histogram
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="1"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="5"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="15"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="30"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="60"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="120"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="300"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="600"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="1200"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="1800"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="3600"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="7200"} 1
kiln_flow_duration_seconds_bucket{result="failed",verb="manage",le="+Inf"} 1
kiln_flow_duration_seconds_sum{result="failed",verb="manage"} 1
kiln_flow_duration_seconds_count{result="failed",verb="manage"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="1"} 0
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="5"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="15"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="30"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="60"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="120"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="300"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="600"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="1200"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="1800"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="3600"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="7200"} 1
kiln_flow_duration_seconds_bucket{result="success",verb="active",le="+Inf"} 1
kiln_flow_duration_seconds_sum{result="success",verb="active"} 5
kiln_flow_duration_seconds_count{result="success",verb="active"} 1
`
	if err := testutil.CollectAndCompare(m.flowDuration, strings.NewReader(expect)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.stepDuration); n != 2 {
		t.Errorf("step duration series = %d, want 2 (write_image, boot_instance)", n)
	}
}

func TestNodeCollectorAndMiddleware(t *testing.T) {
	st := newStore(t)
	reg := prometheus.NewRegistry()
	m := New(reg, st)
	ctx := context.Background()
	on := proto.PowerOn
	for i, s := range []proto.ProvisionState{proto.StateActive, proto.StateActive, proto.StateDeployWait} {
		n := &proto.Node{UUID: "0e6969d5-eb31-4a27-95ab-cfe93f22d4a" + string(rune('0'+i)), Driver: "fake-hardware", ProvisionState: s, PowerState: &on,
			DriverInternalInfo: proto.Dict{}}
		if s == proto.StateDeployWait {
			n.DriverInternalInfo[proto.InfoAgentLastHeartbeat] = time.Now().Add(-42 * time.Second).UTC().Format(time.RFC3339Nano)
		}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			found[key] = mt.GetGauge().GetValue()
		}
	}
	if v := found["kiln_nodes,maintenance=false,power_state=power on,provision_state=active"]; v != 2 {
		t.Errorf("active nodes = %v; gathered %v", v, found)
	}
	if v := found["kiln_agent_heartbeat_age_seconds,node=0e6969d5-eb31-4a27-95ab-cfe93f22d4a2"]; v < 41 || v > 100 {
		t.Errorf("heartbeat age = %v, want ~42", v)
	}

	e := echo.New()
	e.Use(m.Middleware())
	e.GET("/v1/nodes/:node", func(c echo.Context) error {
		if c.Param("node") == "missing" {
			return echo.NewHTTPError(http.StatusNotFound)
		}
		return c.String(http.StatusOK, "ok")
	})
	for _, p := range []string{"/v1/nodes/a", "/v1/nodes/b", "/v1/nodes/missing"} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
	}
	if n := testutil.CollectAndCount(m.apiDuration); n != 2 {
		t.Errorf("API latency series = %d, want 2 (one route, codes 200 and 404)", n)
	}
	if got := testutil.CollectAndCount(m.apiDuration, "kiln_api_request_duration_seconds"); got != 2 {
		t.Errorf("series = %d", got)
	}
}

func TestStoreWrites(t *testing.T) {
	st := newStore(t)
	reg := prometheus.NewRegistry()
	New(reg, st)
	ctx := context.Background()
	n := &proto.Node{UUID: "0e6969d5-eb31-4a27-95ab-cfe93f22d4b0", Driver: "fake-hardware", ProvisionState: proto.StateEnroll}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := st.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]float64{"update_node": 2, "update_node_lost": 0, "reserve": 0, "release": 0, "record_agent": 0, "record_seen": 0, "history": 0, "inventory": 0}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "kiln_store_writes_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			got[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
		}
	}
	if got["other"] < 1 { // the create, and whatever opening the store wrote
		t.Errorf("other writes = %v, want at least the create", got["other"])
	}
	delete(got, "other")
	if !maps.Equal(got, want) {
		t.Errorf("kiln_store_writes_total = %v, want %v", got, want)
	}
}

// TestNodeGaugesMatchDecodedNodes: the gauges read from the columns are
// the ones computed from every node decoded (the old collector, kept for
// stores that are not SQL).
func TestNodeGaugesMatchDecodedNodes(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	on, off := proto.PowerOn, proto.PowerOff
	beat := proto.Dict{proto.InfoAgentLastHeartbeat: time.Now().Add(-7 * time.Second).UTC().Format(time.RFC3339Nano)}
	for i, n := range []proto.Node{
		{ProvisionState: proto.StateActive, PowerState: &on},
		{ProvisionState: proto.StateActive, PowerState: &on, Maintenance: true},
		{ProvisionState: proto.StateEnroll},
		{ProvisionState: proto.StateCleanWait, PowerState: &off, DriverInternalInfo: beat},
		{ProvisionState: proto.StateCleanWait, PowerState: &off, DriverInternalInfo: proto.Dict{"agent_url": "http://192.0.2.9:9999"}},
	} {
		n.UUID = "b0000000-0000-4000-8000-00000000000" + string(rune('0'+i))
		n.Driver = "fake-hardware"
		if err := st.CreateNode(ctx, &n); err != nil {
			t.Fatal(err)
		}
	}
	counts, beats, err := store.NodeGauges(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	wantCounts, wantBeats, err := nodeGaugesOf(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	sortCounts := func(c []store.NodeCount) {
		slices.SortFunc(c, func(a, b store.NodeCount) int {
			return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
		})
	}
	sortCounts(counts)
	sortCounts(wantCounts)
	if !slices.Equal(counts, wantCounts) || len(counts) != 4 {
		t.Errorf("counts = %+v, decoded %+v", counts, wantCounts)
	}
	if len(beats) != 1 || len(wantBeats) != 1 || beats[0].UUID != wantBeats[0].UUID || !beats[0].Last.Equal(wantBeats[0].Last) {
		t.Errorf("heartbeats = %+v, decoded %+v", beats, wantBeats)
	}
}

// failingCollector is a collector whose every gathering fails.
type failingCollector struct{ desc *prometheus.Desc }

func (f failingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f failingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.desc, errors.New("store read past its deadline"))
}

// TestHandlerServesWhatItGathered: a failing collector costs its own
// metrics, not the endpoint (it answered 500 at 10,000 nodes when the node
// gauges ran past their deadline).
func TestHandlerServesWhatItGathered(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg, newStore(t))
	reg.MustRegister(failingCollector{prometheus.NewDesc("kiln_test_failing", "fails", nil, nil)})
	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200: %s", rec.Code, rec.Body)
	}
	if !strings.Contains(rec.Body.String(), "kiln_flow_duration_seconds") && !strings.Contains(rec.Body.String(), "# HELP kiln_") {
		t.Errorf("the other metrics are missing:\n%s", rec.Body)
	}
}
