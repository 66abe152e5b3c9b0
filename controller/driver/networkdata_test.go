package driver

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestNetworkData(t *testing.T) {
	const yamlDoc = "interfaces:\n- name: eno1\n  type: ethernet\n  ipv4: {address: [{ip: 192.0.2.5, prefix-length: 24}]}\n"
	nmstateObj := proto.Dict{"interfaces": []any{map[string]any{"name": "eno1", "type": "ethernet"}}}
	for _, tc := range []struct {
		name string
		node proto.Node
		want string // substring of the document; "" for none
		err  string
	}{
		{"none", proto.Node{}, "", ""},
		{"yaml string", proto.Node{DriverInfo: proto.Dict{"preprovisioning_network_data": yamlDoc}}, "192.0.2.5", ""},
		{"object", proto.Node{DriverInfo: proto.Dict{"preprovisioning_network_data": map[string]any(nmstateObj)}}, `"eno1"`, ""},
		{"nmstate network_data", proto.Node{NetworkData: nmstateObj}, `"eno1"`, ""},
		{"openstack network_data is not ours", proto.Node{NetworkData: proto.Dict{"links": []any{}}}, "", ""},
		{"driver_info wins", proto.Node{DriverInfo: proto.Dict{"preprovisioning_network_data": yamlDoc}, NetworkData: nmstateObj}, "192.0.2.5", ""},
		{"empty string", proto.Node{DriverInfo: proto.Dict{"preprovisioning_network_data": ""}}, "", ""},

		{"unsupported type", proto.Node{UUID: "u1", DriverInfo: proto.Dict{"preprovisioning_network_data": "interfaces:\n- name: br0\n  type: linux-bridge\n"}},
			"", `node u1 driver_info.preprovisioning_network_data: parse NMState: interface br0: type "linux-bridge" not supported`},
		{"not a document", proto.Node{DriverInfo: proto.Dict{"preprovisioning_network_data": float64(3)}}, "", "want an NMState document"},
		{"bad network_data", proto.Node{UUID: "u2", NetworkData: proto.Dict{"interfaces": "eth0"}}, "", "node u2 network_data: parse NMState"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := NetworkData(&tc.node)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tc.want == "") != (doc == nil) || !strings.Contains(string(doc), tc.want) {
				t.Errorf("document %q, want one containing %q", doc, tc.want)
			}
		})
	}
}
