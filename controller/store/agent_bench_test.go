package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// BenchmarkRecordAgent is an agent's steady heartbeat on the store: its
// node read (AgentOf) and the heartbeat's keys recorded (RecordAgent), one
// after the other as one agent sends them, on a SQLite file, with a
// deployed node's document.
func BenchmarkRecordAgent(b *testing.B) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(b.TempDir(), "kiln.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	name := "bench-agent"
	n := &proto.Node{UUID: "9d0c5f0e-1a2b-4c3d-8e9f-0a1b2c3d4e5f", Name: &name, Driver: "fake-hardware",
		ProvisionState: proto.StateDeployWait, Maintenance: true,
		DriverInfo: proto.Dict{"ipmi_password": "x", "ipmi_address": "10.0.0.1", "ipmi_username": "admin", "deploy_kernel": "http://10.0.0.1/k", "deploy_ramdisk": "http://10.0.0.1/r"},
		DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "bench-token", "deploy_steps": []any{map[string]any{"step": "deploy", "interface": "deploy", "priority": 100}},
			"agent_cached_deploy_steps": map[string]any{"deploy": []any{map[string]any{"step": "write_image", "priority": 80}}}},
		Properties:   proto.Dict{"cpus": 8, "memory_mb": 16384, "local_gb": 100, "cpu_arch": "x86_64", "capabilities": "boot_mode:uefi"},
		InstanceInfo: proto.Dict{"image_source": "http://10.0.0.1/image.qcow2", "root_gb": 10, "image_checksum": "abc"}}
	if err := st.CreateNode(ctx, n); err != nil {
		b.Fatal(err)
	}
	beat := func() {
		v, err := st.AgentOf(ctx, n.UUID)
		if err != nil {
			b.Fatal(err)
		}
		set := []KeyValue{{proto.InfoAgentURL, "http://10.0.0.9:9999"}, {proto.InfoAgentVersion, "10.0.0"},
			{proto.InfoAgentLastHeartbeat, time.Now().UTC().Format(time.RFC3339Nano)}}
		if ok, err := st.RecordAgent(ctx, v, set, false); err != nil || !ok {
			b.Fatalf("RecordAgent = %v, %v", ok, err)
		}
	}
	beat() // the agent's first heartbeat adds its keys
	b.ReportAllocs()
	cpu0 := benchCPU()
	b.ResetTimer()
	for range b.N {
		beat()
	}
	b.StopTimer()
	b.ReportMetric(float64((benchCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// benchCPU is the user and system CPU time this process has used.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRecordSeen is agents' narrow heartbeat stamps (RecordSeen) on
// the store from 16 goroutines, each stamping its own node of 256 on a
// SQLite file: the write the API's written heartbeat adds to its read. It
// reports the committed record_seen writes (groups) per stamp.
func BenchmarkRecordSeen(b *testing.B) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(b.TempDir(), "kiln.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const nodes = 256
	views := make([]AgentView, nodes)
	for i := range views {
		n := &proto.Node{UUID: fmt.Sprintf("9d0c5f0e-1a2b-4c3d-8e9f-%012d", i), Driver: "fake-hardware",
			ProvisionState: proto.StateDeployWait, Maintenance: true,
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "bench-token"}}
		if err := st.CreateNode(ctx, n); err != nil {
			b.Fatal(err)
		}
		if views[i], err = st.AgentOf(ctx, n.UUID); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	counts := st.(WriteCounter)
	groups0 := counts.WriteCounts()["record_seen"]
	b.ReportAllocs()
	b.SetParallelism(8) // 16 goroutines on 2 cores, as the API benchmarks
	cpu0 := benchCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			if ok, err := st.RecordSeen(ctx, views[i%nodes], time.UnixMicro(i)); err != nil || !ok {
				b.Errorf("RecordSeen = %v, %v", ok, err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((benchCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(counts.WriteCounts()["record_seen"]-groups0)/float64(b.N), "groups/op")
}
