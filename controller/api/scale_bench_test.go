package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// scaleSizes are the fleet sizes BenchmarkScale runs at: 1,000 and 10,000
// nodes unless KILN_BENCH_NODES lists others (KILN_BENCH_NODES=1000,10000,100000
// for the 100k check; enrolling 100k nodes takes a minute or two).
func scaleSizes(b *testing.B) []int {
	spec := os.Getenv("KILN_BENCH_NODES")
	if spec == "" {
		return []int{1000, 10000}
	}
	var sizes []int
	for f := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 100 {
			b.Fatalf("KILN_BENCH_NODES=%q: want sizes of at least 100, comma-separated", spec)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// scaleUUID is the i-th node's UUID; ports use the same with another prefix.
func scaleUUID(prefix string, i int) string {
	return fmt.Sprintf("%s-0000-4000-8000-%012d", prefix, i)
}

// scaleFleet enrolls n nodes with a port each through the store directly:
// states, drivers, groups, owners and classes vary, 1% are in maintenance
// with a fault, so each filter selects a realistic share.
func scaleFleet(b *testing.B, n int) (*httptest.Server, store.Store) {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	states := []proto.ProvisionState{proto.StateAvailable, proto.StateActive, proto.StateManageable, proto.StateEnroll}
	nodes := make([]*proto.Node, 0, n)
	ports := make([]*proto.Port, 0, n)
	on := proto.PowerOn
	for i := range n {
		name := fmt.Sprintf("node-%06d", (i*7919)%n) // names in another order than ids
		node := &proto.Node{UUID: scaleUUID("5ca1e000", i), Name: &name, Driver: []string{"fake-hardware", "ipmi"}[i%2],
			ProvisionState: states[i%len(states)], PowerState: &on, ConductorGroup: fmt.Sprintf("rack-%d", i%10),
			Owner: ptr(fmt.Sprintf("tenant-%d", i%20)), ResourceClass: ptr([]string{"baremetal", "gpu"}[i%2]),
			DriverInfo:         proto.Dict{"ipmi_address": "10.0.0.1", "ipmi_username": "admin", "ipmi_password": "secret"},
			DriverInternalInfo: proto.Dict{}, InstanceInfo: proto.Dict{}, Extra: proto.Dict{"rack": i % 10},
			Properties: proto.Dict{"cpus": 32, "memory_mb": 262144, "local_gb": 1800, "cpu_arch": "x86_64"},
			Traits:     []string{}, BootInterface: "fake", DeployInterface: "fake", PowerInterface: "fake", ManagementInterface: "fake"}
		if i%100 == 0 {
			node.Maintenance = true
			node.MaintenanceReason = ptr("bench")
			node.Fault = ptr("power failure")
		}
		nodes = append(nodes, node)
		ports = append(ports, &proto.Port{UUID: scaleUUID("5ca1e001", i), NodeUUID: node.UUID, PXEEnabled: true,
			Address: fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", i>>24&0xff, i>>16&0xff, i>>8&0xff, i&0xff),
			Extra:   proto.Dict{}, InternalInfo: proto.Dict{}, LocalLinkConnection: proto.Dict{"switch_id": "0a:1b:2c:3d:4e:5f", "port_id": "Ethernet1/1"}})
	}
	if err := store.CreateNodes(ctx, st, nodes, ports); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "bench"}))
	b.Cleanup(srv.Close)
	return srv, st
}

func ptr(s string) *string { return &s }

// BenchmarkScale reads every list shape at each fleet size: a page of 100
// must cost the same at 100,000 nodes as at 1,000 (O(page), not O(fleet)).
// The marker pages start 50 rows before the end of the fleet.
func BenchmarkScale(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			srv, st := scaleFleet(b, n)
			nearEnd := scaleUUID("5ca1e000", n-50)
			routes := []struct{ name, path string }{
				{"list", "/v1/nodes?limit=100"},
				{"detail", "/v1/nodes/detail?limit=100"},
				{"get", "/v1/nodes/" + nearEnd},
				{"ports", "/v1/ports?limit=100"},
				{"ports-detail", "/v1/ports/detail?limit=100"},
				{"marker-end", "/v1/nodes?limit=100&marker=" + nearEnd},
				{"marker-end-detail", "/v1/nodes/detail?limit=100&marker=" + nearEnd},
				{"detail-sort-name-desc", "/v1/nodes/detail?limit=100&sort_key=name&sort_dir=desc"},
				{"ports-marker-end", "/v1/ports?limit=100&marker=" + scaleUUID("5ca1e001", n-50)},
				{"filter-provision_state", "/v1/nodes?limit=100&provision_state=active"},
				{"filter-driver", "/v1/nodes?limit=100&driver=ipmi"},
				{"filter-conductor_group", "/v1/nodes?limit=100&conductor_group=rack-3"},
				{"filter-owner", "/v1/nodes?limit=100&owner=tenant-7"},
				{"filter-resource_class", "/v1/nodes?limit=100&resource_class=gpu"},
				{"filter-fault", "/v1/nodes?limit=100&fault=power%20failure"},
				{"filter-maintenance", "/v1/nodes?limit=100&maintenance=true"},
				{"sort-name-asc", "/v1/nodes?limit=100&sort_key=name&sort_dir=asc"},
				{"sort-name-desc-marker", "/v1/nodes?limit=100&sort_key=name&sort_dir=desc&marker=" + nearEnd},
			}
			for _, key := range []string{"uuid", "name", "created_at", "updated_at", "provision_state", "driver", "maintenance",
				"instance_uuid", "conductor_group", "resource_class", "owner", "power_state", "fault", "reservation",
				"provision_updated_at"} {
				routes = append(routes, struct{ name, path string }{"sort-" + key + "-desc", "/v1/nodes?limit=100&sort_dir=desc&sort_key=" + key})
			}
			for _, key := range []string{"uuid", "address", "name", "created_at", "updated_at"} {
				routes = append(routes, struct{ name, path string }{"ports-sort-" + key + "-desc", "/v1/ports/detail?limit=100&sort_dir=desc&sort_key=" + key})
			}
			for _, r := range routes {
				b.Run(r.name, func(b *testing.B) { benchGET(b, srv.URL+r.path) })
			}
			// An agent's heartbeat, accepted and recorded, as
			// BenchmarkHeartbeatRecorded at this fleet size.
			agent := scaleUUID("5ca1e000", n/2)
			if _, err := st.UpdateNode(context.Background(), agent, func(node *proto.Node) error {
				node.ProvisionState, node.Maintenance = proto.StateDeployWait, true
				node.DriverInternalInfo = proto.Dict{proto.InfoAgentToken: benchToken, proto.InfoAgentURL: "http://10.0.0.9:9999"}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			b.Run("heartbeat", func(b *testing.B) {
				benchDo(b, "POST", srv.URL+"/v1/heartbeat/"+agent,
					`{"callback_url":"http://10.0.0.9:9999","agent_version":"10.0.0","agent_token":"`+benchToken+`"}`, http.StatusAccepted)
			})
		})
	}
}
