package inspection

import (
	"reflect"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name, inv string
		want      Summary
		err       bool
	}{
		{"full", `{"cpu": {"count": 8, "architecture": "x86_64"}, "memory": {"physical_mb": 16384, "total": 17000000000},
			"disks": [{"name": "/dev/sda", "size": 1000204886016}, {"name": "/dev/sdb", "size": 240057409536}, {"name": "/dev/sr0", "size": 1073741824}],
			"interfaces": [{"name": "eno1", "mac_address": "52:54:00:AA:00:01"}, {"name": "eno2", "mac_address": "52:54:00:aa:00:02"}],
			"boot": {"pxe_interface": "01-52-54-00-aa-00-02"}}`,
			Summary{Properties: proto.Dict{"cpus": 8, "cpu_arch": "x86_64", "memory_mb": 16384, "local_gb": int64(222)},
				MACs: []string{"52:54:00:aa:00:02"}, PXE: "52:54:00:aa:00:02"}, false},
		{"memory from total, every valid MAC without a PXE interface",
			`{"memory": {"total": 4294967296}, "interfaces": [{"name": "a", "mac_address": "52:54:00:00:00:01"}, {"name": "b", "mac_address": "not-a-mac"}, {"name": "c", "mac_address": "52:54:00:00:00:03"}]}`,
			Summary{Properties: proto.Dict{"memory_mb": 4096}, MACs: []string{"52:54:00:00:00:01", "52:54:00:00:00:03"}}, false},
		{"disks under 4 GiB are not root disks", `{"disks": [{"name": "/dev/sda", "size": 2147483648}]}`, Summary{Properties: proto.Dict{}}, false},
		{"not JSON", `{"cpu": `, Summary{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Summarize([]byte(tc.inv))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if !tc.err && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}
