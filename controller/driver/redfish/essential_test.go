package redfish

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestEssentialProperties(t *testing.T) {
	all := proto.Dict{"cpus": 4, "memory_mb": int64(8192), "cpu_arch": "x86_64", "local_gb": int64(39)}
	without := func(keys ...string) proto.Dict {
		d := proto.Dict{}
		for k, v := range all {
			d[k] = v
		}
		for _, k := range keys {
			delete(d, k)
		}
		return d
	}
	for _, tc := range []struct {
		name        string
		found, node proto.Dict
		wantErr     string
		wantLocalGB any
	}{
		{"everything found", without(), nil, "", int64(39)},
		{"no cpus", without("cpus"), nil, "Failed to discover the following properties: cpus on node n1", nil},
		{"no cpus, no memory", without("cpus", "memory_mb"), nil, "properties: cpus, memory_mb on node", nil},
		{"no arch", without("cpu_arch"), nil, "properties: cpu_arch on node", nil},
		{"no cpus but the node has them", without("cpus"), proto.Dict{"cpus": 8.0}, "", int64(39)},
		{"the node's value is zero", without("memory_mb"), proto.Dict{"memory_mb": "0"}, "memory_mb", nil},
		{"no disk: local_gb 0, no failure", without("local_gb"), proto.Dict{"local_gb": 100.0}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &proto.Node{UUID: "n1", Properties: tc.node}
			err := essentialProperties(n, tc.found)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if tc.found["local_gb"] != tc.wantLocalGB {
					t.Errorf("local_gb = %v, want %v", tc.found["local_gb"], tc.wantLocalGB)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
