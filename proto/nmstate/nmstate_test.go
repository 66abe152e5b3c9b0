package nmstate

import (
	"net"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
)

var bondVLANYAML = func() string {
	b, err := os.ReadFile("testdata/bond-vlan.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func TestValidate(t *testing.T) {
	p := netip.MustParsePrefix
	good := Config{
		Interfaces: []Interface{
			{Name: "eth0", Type: Ethernet}, {Name: "eth1", Type: Ethernet},
			{Name: "bond0", Type: Bond, Bond: BondConfig{Mode: "active-backup", Ports: []string{"eth0", "eth1"}}},
			{Name: "bond0.100", Type: VLAN, VLAN: VLANConfig{Base: "bond0", ID: 100},
				IPv4: IPConfig{Addresses: []netip.Prefix{p("192.0.2.2/24")}}, IPv6: IPConfig{Addresses: []netip.Prefix{p("2001:db8::2/64")}}},
		},
		Routes: []Route{{Gateway: netip.MustParseAddr("192.0.2.1")}, {Destination: p("198.51.100.0/24"), Interface: "bond0.100"}},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"duplicate name":  func(c *Config) { c.Interfaces[1].Name = "eth0" },
		"no name":         func(c *Config) { c.Interfaces[0].Name = "" },
		"unknown type":    func(c *Config) { c.Interfaces[0].Type = "wifi" },
		"vlan id 0":       func(c *Config) { c.Interfaces[3].VLAN.ID = 0 },
		"vlan id 4095":    func(c *Config) { c.Interfaces[3].VLAN.ID = 4095 },
		"vlan no base":    func(c *Config) { c.Interfaces[3].VLAN.Base = "" },
		"bond no ports":   func(c *Config) { c.Interfaces[2].Bond.Ports = nil },
		"bond bad mode":   func(c *Config) { c.Interfaces[2].Bond.Mode = "fastest" },
		"bond vlan port":  func(c *Config) { c.Interfaces[2].Bond.Ports = []string{"bond0.100"} },
		"v6 in v4":        func(c *Config) { c.Interfaces[3].IPv4.Addresses = []netip.Prefix{p("2001:db8::9/64")} },
		"v4 in v6":        func(c *Config) { c.Interfaces[3].IPv6.Addresses = []netip.Prefix{p("192.0.2.9/24")} },
		"route no target": func(c *Config) { c.Routes[1].Interface = "" },
		"route mixed": func(c *Config) {
			c.Routes[0] = Route{Destination: p("2001:db8:1::/48"), Gateway: netip.MustParseAddr("192.0.2.1")}
		},
	} {
		c := good
		c.Interfaces = append([]Interface(nil), good.Interfaces...)
		c.Routes = append([]Route(nil), good.Routes...)
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParse(t *testing.T) {
	p, a := netip.MustParsePrefix, netip.MustParseAddr
	bondVLAN := Config{
		Interfaces: []Interface{
			{Name: "port0", Type: Ethernet, MAC: net.HardwareAddr{0x52, 0x54, 0, 0xaa, 0xbb, 1}}, {Name: "port1", Type: Ethernet},
			{Name: "bond0", Type: Bond, MTU: 1400, Bond: BondConfig{Mode: "active-backup", Ports: []string{"port0", "port1"}}},
			{Name: "bond0.100", Type: VLAN, VLAN: VLANConfig{Base: "bond0", ID: 100},
				IPv4: IPConfig{Addresses: []netip.Prefix{p("10.88.0.2/24")}},
				IPv6: IPConfig{Addresses: []netip.Prefix{p("fd00:88::2/64")}}},
		},
		Routes: []Route{
			{Destination: p("0.0.0.0/0"), Gateway: a("10.88.0.1"), Interface: "bond0.100"},
			{Destination: p("198.51.100.0/24"), Gateway: a("10.88.0.1"), Metric: 50},
		},
		DNS: DNS{Servers: []netip.Addr{a("10.88.0.53"), a("fd00:88::53")}, Search: []string{"example.com"}},
	}
	for _, tc := range []struct {
		name, doc string
		want      Config
		err       string
	}{
		{"bond vlan yaml", bondVLANYAML, bondVLAN, ""},
		{"json dhcp", `{"interfaces":[{"name":"eno1","type":"ethernet","ipv4":{"enabled":true,"dhcp":true},"ipv6":{"enabled":true,"dhcp":true,"autoconf":true}}]}`,
			Config{Interfaces: []Interface{{Name: "eno1", Type: Ethernet, IPv4: IPConfig{DHCP: true}, IPv6: IPConfig{DHCP: true}}}}, ""},
		{"legacy slaves", "interfaces:\n- name: b\n  type: bond\n  link-aggregation: {mode: 802.3ad, slaves: [e1]}\n",
			Config{Interfaces: []Interface{{Name: "b", Type: Bond, Bond: BondConfig{Mode: "802.3ad", Ports: []string{"e1"}}}}}, ""},
		{"host address kept", "interfaces:\n- name: e\n  type: ethernet\n  ipv4: {address: [{ip: 192.0.2.77, prefix-length: 26}]}\n",
			Config{Interfaces: []Interface{{Name: "e", Type: Ethernet, IPv4: IPConfig{Addresses: []netip.Prefix{p("192.0.2.77/26")}}}}}, ""},

		{"match by mac", "interfaces:\n- name: enp1s0\n  type: ethernet\n  identifier: mac-address\n  mac-address: 52:54:00:12:34:56\n  ipv4: {dhcp: true}\n",
			Config{Interfaces: []Interface{{Name: "enp1s0", Type: Ethernet, MAC: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}, MatchByMAC: true, IPv4: IPConfig{DHCP: true}}}}, ""},
		{"bond mac not used", "interfaces:\n- name: b\n  type: bond\n  mac-address: 52:54:00:12:34:56\n  link-aggregation: {mode: balance-rr, port: [e]}\n",
			Config{Interfaces: []Interface{{Name: "b", Type: Bond, Bond: BondConfig{Mode: "balance-rr", Ports: []string{"e"}}}}}, ""},

		{"empty", "", Config{}, "empty document"},
		{"bad mac", "interfaces:\n- name: e\n  type: ethernet\n  mac-address: 52:54:00\n", Config{}, `interface e: mac-address "52:54:00" is not an Ethernet MAC address`},
		{"identifier without mac", "interfaces:\n- name: e\n  type: ethernet\n  identifier: mac-address\n", Config{}, "identifier mac-address needs an ethernet interface with a mac-address"},
		{"identifier unknown", "interfaces:\n- name: e\n  type: ethernet\n  identifier: pci-address\n", Config{}, `identifier "pci-address" not supported`},
		{"not yaml", "interfaces: [", Config{}, "parse NMState"},
		{"bridge", "interfaces:\n- name: br0\n  type: linux-bridge\n", Config{}, `interface br0: type "linux-bridge" not supported`},
		{"ovs", "interfaces:\n- name: o\n  type: ovs-interface\n", Config{}, `type "ovs-interface" not supported`},
		{"absent", "interfaces:\n- name: e\n  type: ethernet\n  state: absent\n", Config{}, `interface e: state "absent" not supported`},
		{"route rules", "interfaces: []\nroute-rules:\n  config: []\n", Config{}, "top level: route-rules not supported"},
		{"unknown iface key", "interfaces:\n- name: e\n  type: ethernet\n  ethtool: {}\n", Config{}, "interface e: ethtool not supported"},
		{"dhcp client id", "interfaces:\n- name: e\n  type: ethernet\n  ipv4: {dhcp: true, dhcp-client-id: mac}\n", Config{}, "interface e.ipv4: dhcp-client-id not supported"},
		{"auto-dns false", "interfaces:\n- name: e\n  type: ethernet\n  ipv4: {dhcp: true, auto-dns: false}\n", Config{}, "auto-dns: false not supported"},
		{"bond option", "interfaces:\n- name: b\n  type: bond\n  link-aggregation: {mode: balance-rr, port: [e], options: {xmit_hash_policy: layer3+4}}\n", Config{}, "link-aggregation.options: xmit_hash_policy not supported"},
		{"route table", "routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-address: 192.0.2.1, table-id: 100}\n", Config{}, "table-id 100 not supported"},
		{"route absent", "routes:\n  config:\n  - {destination: 0.0.0.0/0, state: absent}\n", Config{}, `state "absent" not supported`},
		{"dns options", "dns-resolver:\n  config:\n    options: [rotate]\n", Config{}, "dns-resolver.config: options not supported"},
		{"bad address", "interfaces:\n- name: e\n  type: ethernet\n  ipv4: {address: [{ip: 300.1.1.1, prefix-length: 24}]}\n", Config{}, "interface e.ipv4.address[0]"},
		{"bad prefix", "interfaces:\n- name: e\n  type: ethernet\n  ipv4: {address: [{ip: 192.0.2.1, prefix-length: 33}]}\n", Config{}, "prefix-length 33"},
		{"disabled with address", "interfaces:\n- name: e\n  type: ethernet\n  ipv4: {enabled: false, address: [{ip: 192.0.2.1, prefix-length: 24}]}\n", Config{}, "enabled: false with addresses"},
		{"vlan without id", "interfaces:\n- name: v\n  type: vlan\n  vlan: {base-iface: e}\n", Config{}, "interface v.vlan.id: want an integer"},
		{"vlan id range", "interfaces:\n- name: v\n  type: vlan\n  vlan: {base-iface: e, id: 5000}\n", Config{}, "ID in 1..4094"},
		{"no name", "interfaces:\n- type: ethernet\n", Config{}, "interface without a name"},
		{"no type", "interfaces:\n- name: e\n", Config{}, "interface e: no type"},
		{"interfaces not list", "interfaces: {name: e}\n", Config{}, "interfaces: want a list"},
		{"v4 in ipv6", "interfaces:\n- name: e\n  type: ethernet\n  ipv6: {address: [{ip: 192.0.2.1, prefix-length: 24}]}\n", Config{}, "not an IPv6 prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(bondVLANYAML))
	f.Add([]byte(`{"interfaces":[{"name":"e","type":"ethernet","ipv4":{"dhcp":true}}]}`))
	f.Add([]byte("routes:\n  config:\n  - {destination: ::/0, next-hop-address: 'fe80::1', next-hop-interface: e}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b)
		if err != nil {
			return
		}
		if verr := cfg.Validate(); verr != nil {
			t.Fatalf("accepted a config Validate refuses: %v", verr)
		}
	})
}
