package conductor

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// waits measures where a node's time goes between an event (a request, an
// agent heartbeat) and the conductor's answer: in a lane waiting for a
// worker, taking the reservation (a write, behind the store's writer),
// the pass itself, and the agent's command round trip. The fleet
// benchmark reads them per phase from /metrics, to tell queueing from
// the writer from the work.
type waits struct {
	queue     *prometheus.HistogramVec // by lane
	reserve   prometheus.Histogram
	pass      prometheus.Histogram
	command   prometheus.Histogram
	hbCommand prometheus.Histogram
	conflicts prometheus.Counter
	idle      prometheus.Counter
	rounds    prometheus.Counter
	givenUp   prometheus.Counter // places given up for a slow call (places.go)
	inUse     prometheus.GaugeFunc
}

// waitBuckets span 1 ms to about 66 s.
var waitBuckets = prometheus.ExponentialBuckets(0.001, 1.5, 28)

func newWaits() *waits {
	h := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: waitBuckets})
	}
	return &waits{
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kiln_conductor_queue_wait_seconds",
			Help: "Time a node waited in a lane (agent: its agent heartbeated; work: anything else) for a worker.", Buckets: waitBuckets}, []string{"lane"}),
		reserve:   h("kiln_conductor_reserve_seconds", "Time taking a node's reservation, successful or not."),
		pass:      h("kiln_conductor_pass_seconds", "Time a reserved pass over a node took, up to its release."),
		command:   h("kiln_conductor_agent_command_seconds", "Round trip of the agent commands that start a step."),
		hbCommand: h("kiln_conductor_heartbeat_to_command_seconds", "Time from an agent heartbeat reaching the API to the conductor sending the next step."),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "kiln_conductor_reserve_conflicts_total",
			Help: "Reservation attempts that found the node held by someone else."}),
		idle: prometheus.NewCounter(prometheus.CounterOpts{Name: "kiln_conductor_idle_passes_total",
			Help: "Passes that reserved a node and found nothing to do."}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{Name: "kiln_conductor_pass_rounds_total",
			Help: "Rounds passes added for agent heartbeats recorded while they held their node."}),
		givenUp: prometheus.NewCounter(prometheus.CounterOpts{Name: "kiln_conductor_bulk_places_given_up_total",
			Help: "BMC or agent calls slow enough that the bulk pass making them gave its place up."}),
	}
}

// Collectors are the conductor's metrics, for a Prometheus registry.
func (c *Conductor) Collectors() []prometheus.Collector {
	w := c.waits
	return []prometheus.Collector{w.queue, w.reserve, w.pass, w.command, w.hbCommand, w.conflicts, w.idle, w.rounds, w.givenUp, w.inUse}
}

// queued notes a node taken from lane l, queued since at.
func (w *waits) queued(l lane, at time.Time) {
	if at.IsZero() {
		return
	}
	name := "work"
	if l == laneAgent {
		name = "agent"
	}
	w.queue.WithLabelValues(name).Observe(time.Since(at).Seconds())
}
