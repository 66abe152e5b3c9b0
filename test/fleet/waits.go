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

// waitCounters are the counters a phase reports (those with a kind: the
// series of that kind label only).
var waitCounters = []struct{ name, metric, kind string }{
	{"reserve conflicts", "kiln_conductor_reserve_conflicts_total", ""},
	{"idle passes", "kiln_conductor_idle_passes_total", ""},
	{"added rounds", "kiln_conductor_pass_rounds_total", ""},
}

// writeKinds are the store's write kinds (kiln_store_writes_total) a
// phase reports per node: what a node costs the single SQLite writer.
var writeKinds = []string{"update_node", "update_node_lost", "reserve", "release", "record_agent", "history", "inventory", "other"}

func init() {
	for _, k := range writeKinds {
		waitCounters = append(waitCounters, struct{ name, metric, kind string }{"writes " + k, "kiln_store_writes_total", k})
	}
}

// histogram is a cumulative histogram: bucket upper bounds and counts.
type histogram struct {
	bounds []float64
	counts []uint64
	total  uint64
}

// snapshot is one controller's metrics at one moment (or a sum of
// controllers', or a difference).
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

// snapshots reads each live controller's metrics, by name.
func (r *benchRun) snapshots() map[string]snapshot {
	out := map[string]snapshot{}
	for _, c := range r.ctls {
		if !c.alive() {
			continue
		}
		fams, err := scrape(r.hc, "http://"+c.addr+"/metrics")
		if err != nil {
			r.log("metrics of %s: %v", c.name, err)
			continue
		}
		s := snapshot{hist: map[string]*histogram{}, counters: map[string]float64{}}
		s.add(fams)
		out[c.name] = s
	}
	return out
}

// phaseWaits is what the controllers alive at both ends of a phase
// measured between them (a controller killed meanwhile took its
// measures along).
func phaseWaits(before, after map[string]snapshot) Waits {
	total := snapshot{hist: map[string]*histogram{}, counters: map[string]float64{}}
	for name, a := range after {
		if b, ok := before[name]; ok {
			total.plus(a.minus(b))
		}
	}
	return total.waits()
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
				if c.kind == "" || hasLabel(m, "kind", c.kind) {
					s.counters[c.name] += m.GetCounter().GetValue()
				}
			}
		}
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	return slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == name && l.GetValue() == value })
}

// since is what happened between before and s.
func (s snapshot) since(before snapshot) Waits { return s.minus(before).waits() }

// minus is s less before, bucket by bucket.
func (s snapshot) minus(before snapshot) snapshot {
	d := snapshot{hist: map[string]*histogram{}, counters: map[string]float64{}}
	for name, h := range s.hist {
		c := &histogram{bounds: h.bounds, counts: slices.Clone(h.counts), total: h.total}
		if b := before.hist[name]; b != nil && len(b.counts) == len(c.counts) {
			for i := range c.counts {
				c.counts[i] -= min(c.counts[i], b.counts[i])
			}
			c.total -= min(c.total, b.total)
		}
		d.hist[name] = c
	}
	for name, v := range s.counters {
		d.counters[name] = v - before.counters[name]
	}
	return d
}

// plus adds o to s.
func (s snapshot) plus(o snapshot) {
	for name, h := range o.hist {
		acc := s.hist[name]
		if acc == nil {
			s.hist[name] = &histogram{bounds: h.bounds, counts: slices.Clone(h.counts), total: h.total}
			continue
		}
		for i := range min(len(acc.counts), len(h.counts)) {
			acc.counts[i] += h.counts[i]
		}
		acc.total += h.total
	}
	for name, v := range o.counters {
		s.counters[name] += v
	}
}

// waits are s's quantiles and counters.
func (s snapshot) waits() Waits {
	w := Waits{Counters: map[string]float64{}}
	for _, m := range waitMetrics {
		if h := s.hist[m.name]; h != nil {
			w.Hist = append(w.Hist, Wait{Name: m.name, Count: h.total, P50: h.quantile(0.5), P99: h.quantile(0.99)})
		}
	}
	for _, c := range waitCounters {
		w.Counters[c.name] = s.counters[c.name]
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
			if c.kind == "" {
				fmt.Fprintf(w, " %s %.0f;", c.name, p.Waits.Counters[c.name])
			}
		}
		fmt.Fprintln(w)
		if p.Reached > 0 {
			fmt.Fprintf(w, "%-8s writes/node", p.Name)
			all := 0.0
			for _, c := range waitCounters {
				if c.kind != "" {
					v := p.Waits.Counters[c.name] / float64(p.Reached)
					all += v
					fmt.Fprintf(w, " %s %.2f;", c.kind, v)
				}
			}
			fmt.Fprintf(w, " all %.2f\n", all)
		}
	}
}
