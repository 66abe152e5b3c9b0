package redfish_test

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// heapInUse is the live heap after a full collection.
func heapInUse() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, runtime.NumGoroutine()
}

// BenchmarkPoolPerBMC reads the power state of 1,000 BMCs, each at its
// own address (one simulated Redfish service behind 1,000 loopback
// listeners), through one pool, and reports what the pool then holds per
// BMC: live heap (client and loopback server sides: every connection the
// pool keeps open is one the server keeps too) and goroutines.
func BenchmarkPoolPerBMC(b *testing.B) {
	const bmcs = 1000
	svc, err := bmcsim.NewService(bmcsim.Config{Systems: []bmcsim.SystemConfig{{Backend: bmcsim.NewMemory(0, bmcsim.Inventory{})}}})
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	var nodes []*proto.Node
	for range bmcs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go srv.Serve(l) //nolint:errcheck // ends with Close
		nodes = append(nodes, &proto.Node{UUID: l.Addr().String(), DriverInfo: proto.Dict{
			"redfish_address": "http://" + l.Addr().String(), "redfish_username": "admin", "redfish_password": "password"}})
	}
	defer srv.Close()
	ctx := context.Background()
	var heap, goroutines float64
	for range b.N {
		h0, g0 := heapInUse()
		pool := redfish.NewPool(redfish.Limits{}, nil)
		pw := &redfish.Power{Pool: pool}
		for _, n := range nodes {
			if _, err := pw.GetPowerState(ctx, n); err != nil {
				b.Fatal(err)
			}
		}
		h1, g1 := heapInUse()
		heap += float64(int64(h1)-int64(h0)) / bmcs
		goroutines += float64(g1-g0) / bmcs
		if err := pool.Close(ctx); err != nil {
			b.Fatal(err)
		}
		runtime.KeepAlive(pool)
	}
	b.ReportMetric(heap/float64(b.N), "heap-B/BMC")
	b.ReportMetric(goroutines/float64(b.N), "goroutines/BMC")
}
