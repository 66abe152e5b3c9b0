package conductor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// BenchmarkHeartbeatToNextCommand measures the controller-side delay from an
// agent's "step finished" heartbeat reaching the API to the conductor sending
// the next step, over automated cleaning and deploys of 20 nodes with scripted
// agents. Run: go test -run '^$' -bench HeartbeatToNext -benchtime 1x ./test/conductor/
func BenchmarkHeartbeatToNextCommand(b *testing.B) {
	for range b.N {
		c := startController(b, controllerOpts{})
		var uuids []string
		for i := range 20 {
			m := &machine{}
			uuids = append(uuids, c.enroll(fmt.Sprintf("lat-%02d", i), fmt.Sprintf("52:54:00:00:20:%02x", i), map[string]any{
				"instance_info": map[string]any{"image_source": "http://images.example/x.raw", "image_checksum": fmt.Sprintf("%064x", i)},
			}, m))
		}
		for _, verb := range []struct {
			v    string
			want proto.ProvisionState
		}{{"manage", proto.StateManageable}, {"provide", proto.StateAvailable}, {"active", proto.StateActive}} {
			for _, u := range uuids {
				c.provision(u, map[string]any{"target": verb.v})
			}
			for _, u := range uuids {
				c.waitState(u, verb.want, 60*time.Second)
			}
		}
		p50, p99, n := c.cond.HeartbeatLatency()
		b.ReportMetric(float64(p50.Microseconds())/1000, "ms-p50")
		b.ReportMetric(float64(p99.Microseconds())/1000, "ms-p99")
		b.ReportMetric(float64(n), "samples")
	}
}
