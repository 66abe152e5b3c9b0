package fleet

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The conductor's waits (controller/conductor/waits.go), read from each
// controller's /metrics at the start and the end of a phase: where a
// node's time went during it.

// waitMetrics are the histograms a phase reports, by the name printed.
var waitMetrics = []struct{ name, metric, lane string }{
	{"queue(agent)", "kiln_conductor_queue_wait_seconds", "agent"},
	{"queue(work)", "kiln_conductor_queue_wait_seconds", "work"},
	{"reserve", "kiln_conductor_reserve_seconds", ""},
	{"pass", "kiln_conductor_pass_seconds", ""},
	{"agent cmd", "kiln_conductor_agent_command_seconds", ""},
	{"hb→cmd", "kiln_conductor_heartbeat_to_command_seconds", ""},
}

// waitCounters are the counters a phase reports.
var waitCounters = []struct{ name, metric string }{
	{"reserve conflicts", "kiln_conductor_reserve_conflicts_total"},
	{"idle passes", "kiln_conductor_idle_passes_total"},
}

// histogram is a cumulative histogram: bucket upper bounds and counts.
type histogram struct {
	bounds []float64
	counts []uint64
	total  uint64
}

// snapshot is every controller's metrics at one moment, summed.
type snapshot struct {
	hist     map[string]*histogram
	counters map[string]float64
}

// Wait is one measured wait of a phase.
type Wait struct {
	Name     string
	Count    uint64
	P50, P99 time.Duration
}

// Waits is what a phase's conductors measured.
type Waits struct {
	Hist     []Wait
	Counters map[string]float64
}

func (r *benchRun) snapshot() snapshot {
	s := snapshot{hist: map[string]*histogram{}, counters: map[string]float64{}}
	for _, c := range r.ctls {
		if !c.alive() {
			continue
		}
		fams, err := scrape(r.hc, "http://"+c.addr+"/metrics")
		if err != nil {
			r.log("metrics of %s: %v", c.name, err)
			continue
		}
		s.add(fams)
	}
	return s
}

func scrape(hc *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
}

func (s snapshot) add(fams map[string]*dto.MetricFamily) {
	for _, w := range waitMetrics {
		f := fams[w.metric]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			if w.lane != "" && !hasLabel(m, "lane", w.lane) {
				continue
			}
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			acc := s.hist[w.name]
			if acc == nil {
				acc = &histogram{}
				for _, b := range h.GetBucket() {
					acc.bounds = append(acc.bounds, b.GetUpperBound())
				}
				acc.counts = make([]uint64, len(acc.bounds))
				s.hist[w.name] = acc
			}
			for i, b := range h.GetBucket() {
				if i < len(acc.counts) {
					acc.counts[i] += b.GetCumulativeCount()
				}
			}
			acc.total += h.GetSampleCount()
		}
	}
	for _, c := range waitCounters {
		if f := fams[c.metric]; f != nil {
			for _, m := range f.GetMetric() {
				s.counters[c.name] += m.GetCounter().GetValue()
			}
		}
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	return slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == name && l.GetValue() == value })
}

// since is what happened between before and s.
func (s snapshot) since(before snapshot) Waits {
	w := Waits{Counters: map[string]float64{}}
	for _, m := range waitMetrics {
		h := s.hist[m.name]
		if h == nil {
			continue
		}
		d := histogram{bounds: h.bounds, counts: slices.Clone(h.counts), total: h.total}
		if b := before.hist[m.name]; b != nil && len(b.counts) == len(d.counts) {
			for i := range d.counts {
				d.counts[i] -= min(d.counts[i], b.counts[i])
			}
			d.total -= min(d.total, b.total)
		}
		w.Hist = append(w.Hist, Wait{Name: m.name, Count: d.total, P50: d.quantile(0.5), P99: d.quantile(0.99)})
	}
	for _, c := range waitCounters {
		w.Counters[c.name] = s.counters[c.name] - before.counters[c.name]
	}
	return w
}

// quantile estimates the q-quantile by linear interpolation within the
// bucket that holds it (as PromQL's histogram_quantile does); a quantile
// past the last finite bound reads as that bound.
func (h histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := q * float64(h.total)
	lower, prev := 0.0, uint64(0)
	for i, c := range h.counts {
		if float64(c) >= rank {
			if math.IsInf(h.bounds[i], 1) {
				// Beyond the last finite bound: that bound is all
				// a histogram can say.
				return time.Duration(lower * float64(time.Second))
			}
			in := float64(c - prev)
			frac := 1.0
			if in > 0 {
				frac = (rank - float64(prev)) / in
			}
			return time.Duration((lower + (h.bounds[i]-lower)*frac) * float64(time.Second))
		}
		lower, prev = h.bounds[i], c
	}
	return time.Duration(lower * float64(time.Second))
}

// printWaits writes each phase's waits, as one line per phase.
func (res *Result) printWaits(w io.Writer) {
	if !slices.ContainsFunc(res.Phases, func(p Phase) bool { return len(p.Waits.Hist) > 0 }) {
		return
	}
	fmt.Fprintf(w, "conductor waits per phase (p50/p99, count):\n")
	for _, p := range res.Phases {
		if len(p.Waits.Hist) == 0 {
			continue
		}
		fmt.Fprintf(w, "%-8s", p.Name)
		for _, h := range p.Waits.Hist {
			fmt.Fprintf(w, " %s %s/%s (%d);", h.Name, ms(h.P50), ms(h.P99), h.Count)
		}
		for _, c := range waitCounters {
			fmt.Fprintf(w, " %s %.0f;", c.name, p.Waits.Counters[c.name])
		}
		fmt.Fprintln(w)
	}
}
