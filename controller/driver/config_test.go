package driver

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestCheckCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name       string
		props, ins any
		wantErr    string
	}{
		{"none", nil, nil, ""},
		{"empty string", "", nil, ""},
		{"string, good values", "boot_mode:uefi, secure_boot:true,disk_label:gpt,cpu_vt:true", nil, ""},
		{"upper case value", "boot_mode:UEFI", nil, ""},
		{"object", map[string]any{"boot_mode": "bios", "secure_boot": false}, nil, ""},
		{"bad boot_mode", "boot_mode:efi", nil, `properties/capabilities: boot_mode "efi" is not one of bios, uefi`},
		{"bad disk_label in instance_info", nil, "disk_label:dos", `instance_info/capabilities: disk_label "dos"`},
		{"bad boot_option", map[string]any{"boot_option": "kexec"}, nil, `boot_option "kexec"`},
		{"not key:value", "boot_mode", nil, `"boot_mode" is not key:value`},
		{"empty key", ":uefi", nil, "is not key:value"},
		{"wrong type", 42.0, nil, "must be a string or an object, not float64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &proto.Node{Properties: proto.Dict{}, InstanceInfo: proto.Dict{}}
			if tc.props != nil {
				n.Properties["capabilities"] = tc.props
			}
			if tc.ins != nil {
				n.InstanceInfo["capabilities"] = tc.ins
			}
			err := CheckCapabilities(n)
			if tc.wantErr == "" && err != nil {
				t.Errorf("unexpected error %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
