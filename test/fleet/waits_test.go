package fleet

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metricsAt is a controller's /metrics text with the agent lane's
// histogram holding counts per bucket 0.01, 0.1, 1 and +Inf (cumulative).
func metricsAt(t *testing.T, c10ms, c100ms, c1s, total int) snapshot {
	t.Helper()
	text := "# TYPE kiln_conductor_queue_wait_seconds histogram\n" +
		"kiln_conductor_queue_wait_seconds_bucket{lane=\"agent\",le=\"0.01\"} " + itoa(c10ms) + "\n" +
		"kiln_conductor_queue_wait_seconds_bucket{lane=\"agent\",le=\"0.1\"} " + itoa(c100ms) + "\n" +
		"kiln_conductor_queue_wait_seconds_bucket{lane=\"agent\",le=\"1\"} " + itoa(c1s) + "\n" +
		"kiln_conductor_queue_wait_seconds_bucket{lane=\"agent\",le=\"+Inf\"} " + itoa(total) + "\n" +
		"kiln_conductor_queue_wait_seconds_sum{lane=\"agent\"} 1\n" +
		"kiln_conductor_queue_wait_seconds_count{lane=\"agent\"} " + itoa(total) + "\n" +
		"# TYPE kiln_conductor_idle_passes_total counter\nkiln_conductor_idle_passes_total " + itoa(total) + "\n"
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot{hist: map[string]*histogram{}, counters: map[string]float64{}}
	s.add(fams)
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }

// A phase's waits are the difference of two scrapes, and their quantiles
// are interpolated within the bucket that holds them.
func TestPhaseWaitsFromTwoScrapes(t *testing.T) {
	before := metricsAt(t, 50, 50, 50, 50)   // 50 fast waits before the phase
	after := metricsAt(t, 50, 140, 149, 150) // then 90 in (10 ms, 100 ms], 9 in (100 ms, 1 s], 1 beyond
	w := after.since(before)
	var agent Wait
	for _, h := range w.Hist {
		if h.Name == "queue(agent)" {
			agent = h
		}
	}
	if agent.Count != 100 {
		t.Fatalf("agent lane: %d waits in the phase, want 100", agent.Count)
	}
	// p50: rank 50 of the 90 in (10, 100] ms → 10 + 90·50/90 = 60 ms.
	if want := 60 * time.Millisecond; agent.P50 < want-time.Millisecond || agent.P50 > want+time.Millisecond {
		t.Errorf("p50 %v, want %v", agent.P50, want)
	}
	// p99: rank 99 is the 9th of the 9 in (0.1, 1] s → 1 s.
	if want := time.Second; agent.P99 < want-time.Millisecond || agent.P99 > want+time.Millisecond {
		t.Errorf("p99 %v, want %v", agent.P99, want)
	}
	// Past the last finite bound (1 s) a quantile reads as that bound.
	if got := (histogram{bounds: []float64{1, math.Inf(1)}, counts: []uint64{0, 10}, total: 10}).quantile(0.5); got != time.Second {
		t.Errorf("p50 beyond the last bound = %v, want 1s", got)
	}
	if got := w.Counters["idle passes"]; got != 100 {
		t.Errorf("idle passes %v, want 100", got)
	}
}

// A controller killed during the phase counts for nothing (its measures
// died with it); the others' differences add up.
func TestPhaseWaitsAddTheSurvivors(t *testing.T) {
	before := map[string]snapshot{"c1": metricsAt(t, 0, 0, 0, 0), "c2": metricsAt(t, 100, 100, 100, 100), "c3": metricsAt(t, 10, 10, 10, 10)}
	after := map[string]snapshot{"c1": metricsAt(t, 10, 10, 10, 10), "c3": metricsAt(t, 30, 30, 30, 30)}
	w := phaseWaits(before, after)
	if len(w.Hist) == 0 || w.Hist[0].Name != "queue(agent)" || w.Hist[0].Count != 30 {
		t.Fatalf("waits %+v, want 30 agent-lane waits (c1's 10, c3's 20)", w.Hist)
	}
	if got := w.Counters["idle passes"]; got != 30 {
		t.Errorf("idle passes %v, want 30", got)
	}
}
