package ipmi_test

import (
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/driver/ipmi"
	"github.com/kilnhq/kiln/proto"
)

type observed struct {
	mu            sync.Mutex
	calls, failed map[string]int
}

func (o *observed) ObserveBMCRequest(drv, _ string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[drv]++
	if err != nil {
		o.failed[drv]++
	}
}

// TestBMCCallsObserved: each exchange with the BMC is reported to the
// observer in the context (the controller's BMC metrics), failures too.
func TestBMCCallsObserved(t *testing.T) {
	sim := startBMC(t, "kiln", "s3cret")
	o := &observed{calls: map[string]int{}, failed: map[string]int{}}
	ctx := driver.WithBMCObserver(t.Context(), o)
	pw := &ipmi.Power{D: &ipmi.Driver{Timeout: time.Second}}
	if _, err := pw.GetPowerState(ctx, sim.node(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.GetPowerState(ctx, sim.node(proto.Dict{"ipmi_password": "wrong"})); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	if o.calls[ipmi.HardwareType] != 2 || o.failed[ipmi.HardwareType] != 1 {
		t.Errorf("observed %v calls, %v failed; want 2 ipmi calls, 1 failed", o.calls, o.failed)
	}
}
