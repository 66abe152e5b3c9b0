package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// benchServer is the API over a SQLite file with n fake-hardware nodes.
func benchServer(b *testing.B, n int) (*httptest.Server, string) {
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
			DriverInfo: proto.Dict{"ipmi_password": "x", "ipmi_address": "10.0.0.1"}, DriverInternalInfo: proto.Dict{},
			Properties: proto.Dict{"cpus": 8, "memory_mb": 16384}, InstanceInfo: proto.Dict{}, Extra: proto.Dict{}}
		if err := st.CreateNode(context.Background(), node); err != nil {
			b.Fatal(err)
		}
		if first == "" {
			first = node.UUID
		}
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "bench"}))
	b.Cleanup(srv.Close)
	return srv, first
}

func benchGET(b *testing.B, url string) {
	b.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	b.SetParallelism(8) // 16 concurrent requests on this 2-core machine
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := http.DefaultClient.Do(req.Clone(context.Background()))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
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
