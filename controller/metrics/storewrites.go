package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilnhq/kiln/controller/store"
)

// writesCollector reports the store's committed writes by kind, read at
// scrape time: with the fleet's phases they give the writes a node costs.
type writesCollector struct {
	c store.WriteCounter
}

var writesDesc = prometheus.NewDesc("kiln_store_writes_total",
	"Writes committed to the store (transactions and single-statement writes), by kind: the node write path's kinds, other for the rest.",
	[]string{"kind"}, nil)

func (wc writesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- writesDesc }

func (wc writesCollector) Collect(ch chan<- prometheus.Metric) {
	counts := wc.c.WriteCounts()
	for _, k := range store.WriteKinds {
		ch <- prometheus.MustNewConstMetric(writesDesc, prometheus.CounterValue, float64(counts[k]), k)
	}
}
