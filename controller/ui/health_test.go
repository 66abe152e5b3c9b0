package ui

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestQuantile(t *testing.T) {
	bounds := []float64{1, 5, 15, math.Inf(1)}
	for _, tc := range []struct {
		name  string
		cum   []uint64
		count uint64
		q     float64
		want  float64
	}{
		{"middle of the first bucket", []uint64{10, 10, 10, 10}, 10, 0.5, 0.5},
		{"interpolated in the second", []uint64{0, 10, 10, 10}, 10, 0.5, 3},
		{"p99 in the third", []uint64{50, 90, 100, 100}, 100, 0.99, 14},
		{"above the last finite bound", []uint64{0, 0, 0, 4}, 4, 0.5, 15},
	} {
		if got := quantile(tc.q, bounds, tc.cum, tc.count); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: quantile = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHealth builds the controller's metric families by name and checks
// what the health page gets from them: counts by state per sample (the
// ring keeps the newest), step quantiles merged over results, heartbeat
// ages, and BMC error rates over the last sample interval.
func TestHealth(t *testing.T) {
	reg := prometheus.NewRegistry()
	nodes := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kiln_nodes"}, []string{"provision_state", "power_state", "maintenance"})
	steps := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kiln_step_duration_seconds", Buckets: []float64{1, 10, 100}}, []string{"step", "result"})
	hb := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kiln_agent_heartbeat_age_seconds"}, []string{"node"})
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kiln_bmc_requests_total"}, []string{"driver"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kiln_bmc_request_errors_total"}, []string{"driver"})
	reg.MustRegister(nodes, steps, hb, reqs, errs)

	h := NewHealthSampler(reg, 2)
	clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	h.now = func() time.Time { return clock }
	nodes.WithLabelValues("available", "power off", "false").Set(3)
	reqs.WithLabelValues("redfish").Add(100)
	errs.WithLabelValues("redfish").Add(1)
	h.Sample()
	for range 2 {
		clock = clock.Add(time.Minute)
		nodes.WithLabelValues("active", "power on", "false").Add(1)
		nodes.WithLabelValues("active", "power on", "true").Add(1)
		h.Sample()
	}
	for _, v := range []float64{0.5, 0.5, 2, 50} {
		steps.WithLabelValues("deploy.write_image", "success").Observe(v)
	}
	steps.WithLabelValues("deploy.write_image", "failed").Observe(0.5)
	steps.WithLabelValues("bios.apply_configuration", "success").Observe(5)
	hb.WithLabelValues("a").Set(10)
	hb.WithLabelValues("b").Set(40)
	hb.WithLabelValues("c").Set(20)
	reqs.WithLabelValues("redfish").Add(50)
	errs.WithLabelValues("redfish").Add(5)
	clock = clock.Add(time.Minute)

	got := h.Health()
	if len(got.States) != 3 { // the two kept samples and now
		t.Fatalf("%d state samples, want 3", len(got.States))
	}
	if c := got.States[0].Counts; c["available"] != 3 || c["active"] != 2 {
		t.Errorf("oldest kept sample %v, want available 3, active 2", c)
	}
	if c := got.States[2].Counts; c["active"] != 4 || !got.States[2].Time.Equal(clock) {
		t.Errorf("current sample %v at %v", c, got.States[2].Time)
	}
	if len(got.Steps) != 2 || got.Steps[0].Step != "deploy.write_image" || got.Steps[0].Count != 5 {
		t.Fatalf("steps %+v", got.Steps)
	}
	if w := got.Steps[0]; w.P50 <= 0 || w.P50 > 1 || w.P99 <= 10 || w.P99 > 100 {
		t.Errorf("write_image p50 %v (want in (0,1]), p99 %v (want in (10,100])", w.P50, w.P99)
	}
	if got.Heartbeats != (HeartbeatAges{Agents: 3, Median: 20, Max: 40}) {
		t.Errorf("heartbeats %+v", got.Heartbeats)
	}
	if len(got.BMC) != 1 || got.BMC[0].Requests != 150 || got.BMC[0].Errors != 6 || math.Abs(got.BMC[0].RecentRate-0.1) > 1e-9 {
		t.Errorf("bmc %+v, want 150 requests, 6 errors, 10%% over the last interval", got.BMC)
	}
}
