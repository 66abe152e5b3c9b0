package conductor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// fleetNodes builds n deployed nodes shaped as a fleet's are (instance and
// driver info, a deploy's internal info), of which every hundredth carries a
// recorded request: the scan's steady state, where few nodes have work.
func fleetNodes(n int) []*proto.Node {
	nodes := make([]*proto.Node, n)
	for i := range nodes {
		nd := &proto.Node{
			UUID: uuid.NewString(), Name: ptr(fmt.Sprintf("rack%d-node%05d", i/40, i)), Driver: "redfish",
			PowerInterface: "redfish", ManagementInterface: "redfish", BootInterface: "ipxe", InspectInterface: "agent", DeployInterface: "direct",
			DriverInfo: proto.Dict{"redfish_address": fmt.Sprintf("http://10.%d.%d.%d:8000", i>>16&255, i>>8&255, i&255),
				"redfish_system_id": "/redfish/v1/Systems/1", "redfish_username": "admin", "redfish_password": "secret"},
			DriverInternalInfo: proto.Dict{"agent_url": "http://10.0.0.1:9999", "agent_version": "10.0.0",
				"agent_last_heartbeat": "2026-12-01T20:00:00Z", "deploy_boot_mode": "uefi", "is_whole_disk_image": true},
			Properties:     proto.Dict{"cpus": 32, "memory_mb": 262144, "local_gb": 900, "cpu_arch": "x86_64", "capabilities": "boot_mode:uefi"},
			Extra:          proto.Dict{},
			InstanceInfo:   proto.Dict{"image_source": "http://images/ubuntu.qcow2", "image_checksum": "sha256:0123456789abcdef", "root_gb": 100},
			ProvisionState: proto.StateActive, PowerState: ptr(proto.PowerOn), InstanceUUID: ptr(uuid.NewString()),
		}
		if i%100 == 0 {
			nd.TargetPowerState = ptr(proto.PowerOff)
		}
		nodes[i] = nd
	}
	return nodes
}

// BenchmarkScan10k is one scan round over 10,000 nodes on SQLite, 100 of
// which have work.
func BenchmarkScan10k(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := store.CreateNodes(ctx, st, fleetNodes(10000), nil); err != nil {
		b.Fatal(err)
	}
	c := New(Config{Store: st, Name: "c1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	b.ResetTimer()
	for range b.N {
		c.scan(ctx)
		c.mu.Lock()
		queued := len(c.queued)
		clear(c.queued)
		c.mu.Unlock()
		for len(c.queue) > 0 {
			<-c.queue
		}
		if queued != 100 {
			b.Fatalf("scan queued %d nodes, want the 100 with work", queued)
		}
	}
}
