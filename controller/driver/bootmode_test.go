package driver

import (
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestTargetBootMode(t *testing.T) {
	for _, tc := range []struct {
		name       string
		instance   proto.Dict
		properties proto.Dict
		want       string
	}{
		{"nothing named", nil, nil, ""},
		{"properties capability", nil, proto.Dict{"capabilities": "boot_mode:bios"}, "bios"},
		{"instance_info capability wins", proto.Dict{"capabilities": map[string]any{"boot_mode": "uefi"}}, proto.Dict{"capabilities": "boot_mode:bios"}, "uefi"},
		{"deploy_boot_mode wins", proto.Dict{"deploy_boot_mode": "bios", "capabilities": "boot_mode:uefi"}, nil, "bios"},
		{"secure boot is UEFI", proto.Dict{"deploy_boot_mode": "bios"}, proto.Dict{"capabilities": "secure_boot:true"}, "uefi"},
		{"case and legacy", proto.Dict{"deploy_boot_mode": "Legacy"}, nil, "bios"},
		{"malformed capabilities are skipped", proto.Dict{"capabilities": "nonsense"}, proto.Dict{"capabilities": "boot_mode:UEFI"}, "uefi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &proto.Node{InstanceInfo: tc.instance, Properties: tc.properties}
			if got := TargetBootMode(n); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
