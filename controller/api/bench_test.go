package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// benchToken is the agent token every benchmark node holds.
const benchToken = "bench-agent-token"

// benchServer is the API over a SQLite file with n fake-hardware nodes, one
// port each. Every node is active with an agent token and URL, as a
// deployed node whose agent still heartbeats.
func benchServer(b *testing.B, n int) (*httptest.Server, string) {
	b.Helper()
	srv, first, _ := benchServerStore(b, n)
	return srv, first
}

// benchServerStore is benchServer with its store.
func benchServerStore(b *testing.B, n int) (*httptest.Server, string, store.Store) {
	b.Helper()
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	var first string
	for i := range n {
		name := fmt.Sprintf("bench-%04d", i)
		node := &proto.Node{UUID: uuid.NewString(), Name: &name, Driver: "fake-hardware", ProvisionState: proto.StateAvailable,
			DriverInfo:         proto.Dict{"ipmi_password": "x", "ipmi_address": "10.0.0.1"},
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: benchToken, proto.InfoAgentURL: "http://10.0.0.9:9999"},
			Properties:         proto.Dict{"cpus": 8, "memory_mb": 16384}, InstanceInfo: proto.Dict{}, Extra: proto.Dict{}}
		if err := st.CreateNode(context.Background(), node); err != nil {
			b.Fatal(err)
		}
		port := &proto.Port{UUID: uuid.NewString(), Address: fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff),
			NodeUUID: node.UUID, PXEEnabled: true, Extra: proto.Dict{}, InternalInfo: proto.Dict{},
			LocalLinkConnection: proto.Dict{"switch_id": "0a:1b:2c:3d:4e:5f", "port_id": fmt.Sprintf("Ethernet1/%d", i)}}
		if err := st.CreatePort(context.Background(), port); err != nil {
			b.Fatal(err)
		}
		if first == "" {
			first = node.UUID
		}
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "bench", AgentHeartbeatTimeout: benchHeartbeatTimeout}))
	b.Cleanup(srv.Close)
	return srv, first, st
}

// benchHeartbeatTimeout is the servers' agent heartbeat timeout: zero for
// the default, a nanosecond (a zero resolution) to write every heartbeat.
var benchHeartbeatTimeout time.Duration

func benchGET(b *testing.B, url string) {
	b.Helper()
	benchDo(b, "GET", url, "", http.StatusOK)
}

// benchDo sends the same request from 16 goroutines and checks each status.
func benchDo(b *testing.B, method, url, body string, want int) {
	b.Helper()
	b.ReportAllocs()
	req, _ := http.NewRequest(method, url, nil)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	b.SetParallelism(8) // 16 concurrent requests on this 2-core machine
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := req.Clone(context.Background())
			if body != "" {
				r.Body = io.NopCloser(strings.NewReader(body))
				r.ContentLength = int64(len(body))
			}
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	// CPU per request is the steady figure on a shared machine, where wall
	// time per request depends on the neighbours. It counts this whole
	// process: the server and the benchmark's HTTP client.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkListNodes100: GET /v1/nodes?limit=100 with 1,000 nodes enrolled.
func BenchmarkListNodes100(b *testing.B) {
	srv, _ := benchServer(b, 1000)
	benchGET(b, srv.URL+"/v1/nodes?limit=100")
}

// BenchmarkListNodesDetail100: the same with every field.
func BenchmarkListNodesDetail100(b *testing.B) {
	srv, _ := benchServer(b, 1000)
	benchGET(b, srv.URL+"/v1/nodes/detail?limit=100")
}

// BenchmarkGetNode: GET /v1/nodes/{uuid}.
func BenchmarkGetNode(b *testing.B) {
	srv, first := benchServer(b, 1000)
	benchGET(b, srv.URL+"/v1/nodes/"+first)
}

// BenchmarkListPorts100: GET /v1/ports?limit=100.
func BenchmarkListPorts100(b *testing.B) {
	srv, _ := benchServer(b, 1000)
	benchGET(b, srv.URL+"/v1/ports?limit=100")
}

// BenchmarkListPortsDetail100: GET /v1/ports/detail?limit=100.
func BenchmarkListPortsDetail100(b *testing.B) {
	srv, _ := benchServer(b, 1000)
	benchGET(b, srv.URL+"/v1/ports/detail?limit=100")
}

// BenchmarkHeartbeat: POST /v1/heartbeat/{uuid} from the agent of an active
// node, a heartbeat the conductor ignores (202).
func BenchmarkHeartbeat(b *testing.B) {
	srv, first := benchServer(b, 1000)
	benchDo(b, "POST", srv.URL+"/v1/heartbeat/"+first,
		`{"callback_url":"http://10.0.0.9:9999","agent_version":"10.0.0","agent_token":"`+benchToken+`"}`, http.StatusAccepted)
}

// BenchmarkHeartbeatRecorded: the heartbeat of an agent whose node waits
// for it in maintenance (deploy wait): accepted (202) and recorded (the
// agent's URL, version and last heartbeat) once per resolution (3 s at the
// default timeout); the others are one read.
func BenchmarkHeartbeatRecorded(b *testing.B) { benchHeartbeatRecorded(b) }

// BenchmarkHeartbeatWritten: the same with a zero resolution: every
// heartbeat is one conditional UPDATE, as every heartbeat of an agent at
// ironic-python-agent's cadence (0.3 to 0.6 timeouts apart) is.
func BenchmarkHeartbeatWritten(b *testing.B) {
	benchHeartbeatTimeout = time.Nanosecond
	defer func() { benchHeartbeatTimeout = 0 }()
	benchHeartbeatRecorded(b)
}

func benchHeartbeatRecorded(b *testing.B) {
	srv, first, st := benchServerStore(b, 1000)
	if _, err := st.UpdateNode(context.Background(), first, func(n *proto.Node) error {
		n.ProvisionState, n.Maintenance = proto.StateDeployWait, true
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	benchDo(b, "POST", srv.URL+"/v1/heartbeat/"+first,
		`{"callback_url":"http://10.0.0.9:9999","agent_version":"10.0.0","agent_token":"`+benchToken+`"}`, http.StatusAccepted)
	n, err := st.GetNode(context.Background(), first)
	if err != nil {
		b.Fatal(err)
	}
	if n.DriverInternalInfo[proto.InfoAgentVersion] != "10.0.0" || n.DriverInternalInfo[proto.InfoAgentLastHeartbeat] == nil {
		b.Fatalf("the heartbeats were not recorded: %v", n.DriverInternalInfo)
	}
}
