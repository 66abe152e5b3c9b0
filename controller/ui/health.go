package ui

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The health page is drawn from the controller's own metrics (the same
// registry /metrics serves), so it needs no monitoring system: the node
// counts by state are sampled every minute into a ring of the last hours;
// step durations, heartbeat ages and BMC errors are read at each request.

// Health is what /ui/api/health answers.
type Health struct {
	// States are the node counts by provision state over time, oldest
	// first; the last sample is taken at the request.
	States []StateSample `json:"states"`
	// Steps are the duration quantiles of each step that ran since the
	// controller started, slowest p99 first.
	Steps []StepQuantiles `json:"steps"`
	// Heartbeats summarises the age of the running agents' last heartbeat.
	Heartbeats HeartbeatAges `json:"heartbeats"`
	// BMC is, per hardware type, the requests and failures since start and
	// over the last sample interval.
	BMC []BMCErrors `json:"bmc"`
}

// StateSample is the fleet at one time.
type StateSample struct {
	Time   time.Time      `json:"time"`
	Counts map[string]int `json:"counts"`
}

// StepQuantiles are estimated from the kiln_step_duration_seconds
// histogram the way Prometheus's histogram_quantile does.
type StepQuantiles struct {
	Step  string  `json:"step"`
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_seconds"`
	P99   float64 `json:"p99_seconds"`
}

// HeartbeatAges are over the nodes whose agent runs.
type HeartbeatAges struct {
	Agents int     `json:"agents"`
	Median float64 `json:"median_seconds"`
	Max    float64 `json:"max_seconds"`
}

// BMCErrors are one hardware type's BMC request counts.
type BMCErrors struct {
	Driver   string  `json:"driver"`
	Requests float64 `json:"requests"`
	Errors   float64 `json:"errors"`
	// RecentRate is errors / requests over the last sample interval, -1
	// when there were no requests in it.
	RecentRate float64 `json:"recent_error_rate"`
}

// HealthSampler keeps the state samples.
type HealthSampler struct {
	g     prometheus.Gatherer
	keep  int
	mu    sync.Mutex
	ring  []StateSample
	bmc   map[string][2]float64 // driver → requests, errors at the previous sample
	prevB map[string][2]float64 // and at the one before, for the recent rate
	now   func() time.Time
}

// NewHealthSampler samples g; keep is how many samples the ring holds.
func NewHealthSampler(g prometheus.Gatherer, keep int) *HealthSampler {
	return &HealthSampler{g: g, keep: keep, now: time.Now}
}

// Run samples every interval until ctx ends (one sample at once).
func (h *HealthSampler) Run(ctx context.Context, interval time.Duration) {
	h.Sample()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Sample()
		}
	}
}

// Sample records the current node counts and BMC totals.
func (h *HealthSampler) Sample() {
	fams, err := h.g.Gather()
	if err != nil && len(fams) == 0 {
		return
	}
	s := StateSample{Time: h.now().UTC(), Counts: nodeCounts(fams)}
	b := bmcTotals(fams)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring = append(h.ring, s)
	if len(h.ring) > h.keep {
		h.ring = slices.Delete(h.ring, 0, len(h.ring)-h.keep)
	}
	h.prevB, h.bmc = h.bmc, b
}

// Health is the page's data now.
func (h *HealthSampler) Health() Health {
	fams, _ := h.g.Gather()
	now := StateSample{Time: h.now().UTC(), Counts: nodeCounts(fams)}
	h.mu.Lock()
	states := append(slices.Clone(h.ring), now)
	prev := h.bmc
	h.mu.Unlock()
	out := Health{States: states, Steps: stepQuantiles(fams), Heartbeats: heartbeatAges(fams), BMC: []BMCErrors{}}
	for drv, tot := range bmcTotals(fams) {
		e := BMCErrors{Driver: drv, Requests: tot[0], Errors: tot[1], RecentRate: -1}
		if p, ok := prev[drv]; ok && tot[0] > p[0] {
			e.RecentRate = (tot[1] - p[1]) / (tot[0] - p[0])
		}
		out.BMC = append(out.BMC, e)
	}
	sort.Slice(out.BMC, func(i, j int) bool { return out.BMC[i].Driver < out.BMC[j].Driver })
	return out
}

func family(fams []*dto.MetricFamily, name string) *dto.MetricFamily {
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func nodeCounts(fams []*dto.MetricFamily) map[string]int {
	out := map[string]int{}
	if f := family(fams, "kiln_nodes"); f != nil {
		for _, m := range f.GetMetric() {
			out[label(m, "provision_state")] += int(m.GetGauge().GetValue())
		}
	}
	return out
}

func bmcTotals(fams []*dto.MetricFamily) map[string][2]float64 {
	out := map[string][2]float64{}
	for i, name := range []string{"kiln_bmc_requests_total", "kiln_bmc_request_errors_total"} {
		if f := family(fams, name); f != nil {
			for _, m := range f.GetMetric() {
				d := label(m, "driver")
				v := out[d]
				v[i] += m.GetCounter().GetValue()
				out[d] = v
			}
		}
	}
	return out
}

func heartbeatAges(fams []*dto.MetricFamily) HeartbeatAges {
	var ages []float64
	if f := family(fams, "kiln_agent_heartbeat_age_seconds"); f != nil {
		for _, m := range f.GetMetric() {
			ages = append(ages, m.GetGauge().GetValue())
		}
	}
	if len(ages) == 0 {
		return HeartbeatAges{}
	}
	slices.Sort(ages)
	return HeartbeatAges{Agents: len(ages), Median: ages[len(ages)/2], Max: ages[len(ages)-1]}
}

// stepQuantiles merges the histogram's results (success, failed) per step.
func stepQuantiles(fams []*dto.MetricFamily) []StepQuantiles {
	f := family(fams, "kiln_step_duration_seconds")
	if f == nil {
		return []StepQuantiles{}
	}
	type hist struct {
		count  uint64
		bounds []float64
		cum    map[float64]uint64
	}
	per := map[string]*hist{}
	for _, m := range f.GetMetric() {
		step := label(m, "step")
		h := per[step]
		if h == nil {
			h = &hist{cum: map[float64]uint64{}}
			per[step] = h
		}
		hm := m.GetHistogram()
		h.count += hm.GetSampleCount()
		for _, b := range hm.GetBucket() {
			ub := b.GetUpperBound()
			if _, seen := h.cum[ub]; !seen {
				h.bounds = append(h.bounds, ub)
			}
			h.cum[ub] += b.GetCumulativeCount()
		}
	}
	out := []StepQuantiles{}
	for step, h := range per {
		if h.count == 0 {
			continue
		}
		slices.Sort(h.bounds)
		cum := make([]uint64, len(h.bounds))
		for i, b := range h.bounds {
			cum[i] = h.cum[b]
		}
		out = append(out, StepQuantiles{Step: step, Count: h.count,
			P50: quantile(0.5, h.bounds, cum, h.count), P99: quantile(0.99, h.bounds, cum, h.count)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].P99 != out[j].P99 {
			return out[i].P99 > out[j].P99
		}
		return out[i].Step < out[j].Step
	})
	return out
}

// quantile interpolates linearly within the bucket holding the q-th
// observation, as Prometheus's histogram_quantile; above the last finite
// bound it answers that bound.
func quantile(q float64, bounds []float64, cum []uint64, count uint64) float64 {
	rank := q * float64(count)
	lower, prev := 0.0, uint64(0)
	for i, ub := range bounds {
		if float64(cum[i]) >= rank {
			if math.IsInf(ub, 1) {
				return lower
			}
			in := cum[i] - prev
			if in == 0 {
				return ub
			}
			return lower + (ub-lower)*(rank-float64(prev))/float64(in)
		}
		lower, prev = ub, cum[i]
	}
	return lower
}
