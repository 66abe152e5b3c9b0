package conductor

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/kilnhq/kiln/controller/store"
)

// observations is how many values histogram h holds.
func observations(t *testing.T, h prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// Each lane's wait is measured when a worker takes a node from it.
func TestQueueWaitsAreMeasuredPerLane(t *testing.T) {
	ctx := context.Background()
	c := New(Config{Name: "c1"})
	c.Notify("node-a")
	c.Notify("node-b")
	c.NotifyAgent("node-b") // moved ahead: its wait is the agent lane's
	for range 2 {
		u, _, _ := c.next(ctx)
		c.done(u)
	}
	if n := observations(t, c.waits.queue.WithLabelValues("agent")); n != 1 {
		t.Errorf("agent lane: %d waits measured, want 1", n)
	}
	if n := observations(t, c.waits.queue.WithLabelValues("work")); n != 1 {
		t.Errorf("work lane: %d waits measured, want 1", n)
	}
	if n := len(c.queuedAt); n != 0 {
		t.Errorf("%d enqueue times kept after the lanes emptied, want 0", n)
	}
}

// A pass is measured from its reservation; one with nothing to do is
// counted idle, and a reservation someone else holds a conflict.
func TestPassesAreMeasured(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := New(Config{Store: st, Name: "c1"})
	uuid := addNodes(t, st, testHW, 1, func(int) string { return "" })[0]
	c.process(ctx, uuid)
	if n := testutil.ToFloat64(c.waits.idle); n != 1 {
		t.Errorf("%v idle passes, want 1", n)
	}
	if err := st.RegisterConductor(ctx, store.Conductor{Hostname: "c2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, uuid, "c2"); err != nil {
		t.Fatal(err)
	}
	c.process(ctx, uuid)
	if n := testutil.ToFloat64(c.waits.conflicts); n != 1 {
		t.Errorf("%v reservation conflicts, want 1", n)
	}
	if n := observations(t, c.waits.reserve); n != 2 {
		t.Errorf("%d reservations measured, want 2", n)
	}
	if n := observations(t, c.waits.pass); n != 1 {
		t.Errorf("%d passes measured, want 1", n)
	}
	if got := len(c.Collectors()); got != 10 {
		t.Errorf("%d collectors, want 10", got)
	}
}
