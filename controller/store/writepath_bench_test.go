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

// The conductor's write path on SQLite: each pass over a node reserves it,
// commits one or more decided changes, and releases it. These measure one
// of each on a 1,000-node database, as a fleet's provide and deploy phases
// run them thousands of times a minute.

func writePathStore(b *testing.B) (Store, []string) {
	b.Helper()
	s := openT(b, "sqlite://"+filepath.Join(b.TempDir(), "kiln.db"), Options{})
	uuids := make([]string, 1000)
	for i := range uuids {
		n := newNode(fmt.Sprintf("bench-%04d", i), fleetShaped)
		mustCreate(b, s, n)
		uuids[i] = n.UUID
	}
	return s, uuids
}

// fleetShaped gives a node the size and shape of a simulated fleet's node
// in its clean phase (a 2 KB document, a BMC password, an agent token, the
// flow's state): the size decides how many pages a write touches.
func fleetShaped(n *proto.Node) {
	n.DriverInfo = proto.Dict{"redfish_address": "http://127.20.1.95:44277", "redfish_password": "password",
		"redfish_system_id": "/redfish/v1/Systems/1", "redfish_username": "admin"}
	n.DriverInternalInfo = proto.Dict{"agent_url": "http://10.0.0.1:9999", "agent_secret_token": "UdmRJ46lkL4OP8B8aUv3i0PHtN7IyZbnSBc85XOOmIA",
		"agent_version": "fakeagent-1.0", "kiln_agent_token_issued_at": "2026-12-02T04:06:20.191180804Z", "kiln_flow_version": 1,
		"kiln_last_bmc_check": map[string]any{"at": "2026-12-02T04:05:05.888679934Z", "ok": true, "operation": "verify"},
		"clean_steps":         []any{map[string]any{"step": "erase_devices_metadata", "interface": "deploy", "priority": 99}}}
	n.Properties = proto.Dict{"cpu_arch": "x86_64", "cpus": 2, "local_gb": 9, "memory_mb": 4096}
	n.ProvisionState, n.TargetProvisionState = proto.StateCleaning, ptr(proto.StateAvailable)
	n.BIOSInterface, n.ConsoleInterface, n.DeployInterface, n.FirmwareInterface = "redfish", "no-console", "direct", "redfish"
	n.InspectInterface, n.ManagementInterface, n.NetworkInterface, n.PowerInterface = "agent", "redfish", "noop", "redfish"
	n.RAIDInterface, n.RescueInterface, n.StorageInterface, n.VendorInterface = "redfish", "no-rescue", "noop", "no-vendor"
	n.Conductor = ptr("fleet-c1")
	n.ProvisionUpdatedAt = wireTime(time.Now())
}

// cpuTime is the process's user and system CPU time so far. On a shared,
// loaded machine the wall time per operation mostly measures waiting; the
// CPU time per operation (reported as cpu-ns/op) is what the write path
// costs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func BenchmarkUpdateNode(b *testing.B) {
	s, uuids := writePathStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b, cpuTime())
	i := 0
	for b.Loop() {
		_, err := s.UpdateNode(ctx, uuids[i%len(uuids)], func(n *proto.Node) error {
			n.DriverInternalInfo["clean_step_index"] = i
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkReserveRelease(b *testing.B) {
	s, uuids := writePathStore(b)
	ctx := context.Background()
	if err := s.RegisterConductor(ctx, Conductor{Hostname: "c1"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer reportCPU(b, cpuTime())
	i := 0
	for b.Loop() {
		u := uuids[i%len(uuids)]
		if _, err := s.Reserve(ctx, u, "c1"); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, u, "c1"); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkUpdateNodeParallel is the conductor's workers updating
// different nodes at once: what one update holds the single writer for
// bounds the throughput. Each backend runs UpdateNode (optimistic: the
// writer runs only the conditional UPDATE) and its locked fallback (the
// whole read-modify-write in one transaction, as UpdateNode was), side by
// side in one process.
func BenchmarkUpdateNodeParallel(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := openT(b, be.newDB(b), Options{})
			uuids := make([]string, 1000)
			for i := range uuids {
				n := newNode(fmt.Sprintf("bench-%04d", i), fleetShaped)
				mustCreate(b, s, n)
				uuids[i] = n.UUID
			}
			ss := s.(*sqlStore)
			for _, path := range []struct {
				name   string
				update func(ctx context.Context, ident string, fn func(*proto.Node) error) (*proto.Node, error)
			}{
				{"optimistic", ss.UpdateNode},
				{"locked", func(ctx context.Context, ident string, fn func(*proto.Node) error) (*proto.Node, error) {
					return ss.updateNodeLocked(ctx, ident, fn, nil)
				}},
			} {
				b.Run(path.name, func(b *testing.B) { updateParallel(b, uuids, path.update) })
			}
		})
	}
}

// updateParallel runs update from 16 goroutines per CPU over distinct
// nodes in turn.
func updateParallel(b *testing.B, uuids []string, update func(ctx context.Context, ident string, fn func(*proto.Node) error) (*proto.Node, error)) {
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	defer reportCPU(b, cpuTime())
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			if _, err := update(ctx, uuids[i%int64(len(uuids))], func(n *proto.Node) error {
				n.DriverInternalInfo["clean_step_index"] = i
				return nil
			}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAddHistory is the event every provision request and flow step
// records.
func BenchmarkAddHistory(b *testing.B) {
	s, uuids := writePathStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b, cpuTime())
	i := 0
	for b.Loop() {
		if err := s.AddHistory(ctx, uuids[i%len(uuids)], proto.HistoryEvent{Event: "Node entered cleaning", EventType: "provisioning", Severity: "INFO"}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
