package netconf

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const bondVLANYAML = `
interfaces:
- name: port0
  type: ethernet
  state: up
  mac-address: "52:54:00:aa:bb:01"
- name: port1
  type: ethernet
- name: bond0
  type: bond
  mtu: 1400
  link-aggregation:
    mode: active-backup
    options:
      miimon: 100
    port:
    - port0
    - port1
  ipv4: {enabled: false}
  ipv6: {enabled: false}
- name: bond0.100
  type: vlan
  vlan:
    base-iface: bond0
    id: 100
  ipv4:
    enabled: true
    dhcp: false
    address:
    - ip: 10.88.0.2
      prefix-length: 24
  ipv6:
    enabled: true
    autoconf: false
    address:
    - ip: fd00:88::2
      prefix-length: 64
routes:
  config:
  - destination: 0.0.0.0/0
    next-hop-address: 10.88.0.1
    next-hop-interface: bond0.100
    table-id: 254
  - destination: 198.51.100.0/24
    next-hop-address: 10.88.0.1
    metric: 50
dns-resolver:
  config:
    server: [10.88.0.53, "fd00:88::53"]
    search: [example.com]
`

func TestParseNMState(t *testing.T) {
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
			got, err := ParseNMState([]byte(tc.doc))
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

func FuzzParseNMState(f *testing.F) {
	f.Add([]byte(bondVLANYAML))
	f.Add([]byte(`{"interfaces":[{"name":"e","type":"ethernet","ipv4":{"dhcp":true}}]}`))
	f.Add([]byte("routes:\n  config:\n  - {destination: ::/0, next-hop-address: 'fe80::1', next-hop-interface: e}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseNMState(b)
		if err != nil {
			return
		}
		if verr := cfg.Validate(); verr != nil {
			t.Fatalf("accepted a config Validate refuses: %v", verr)
		}
		_, _ = Keyfiles(cfg)
	})
}

func TestKeyfiles(t *testing.T) {
	cfg, err := ParseNMState([]byte(bondVLANYAML))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Keyfiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"port0.nmconnection": "[connection]\nid=port0\ntype=ethernet\ninterface-name=port0\nautoconnect=true\nmaster=bond0\nslave-type=bond\n\n[ethernet]\nmac-address=52:54:00:AA:BB:01\n",
		"bond0.nmconnection": "[connection]\nid=bond0\ntype=bond\ninterface-name=bond0\nautoconnect=true\n\n[ethernet]\nmtu=1400\n\n[bond]\nmode=active-backup\nmiimon=100\n\n[ipv4]\nmethod=disabled\n\n[ipv6]\nmethod=disabled\n",
		"bond0.100.nmconnection": "[connection]\nid=bond0.100\ntype=vlan\ninterface-name=bond0.100\nautoconnect=true\n\n[vlan]\nflags=1\nid=100\nparent=bond0\n\n" +
			"[ipv4]\nmethod=manual\naddress1=10.88.0.2/24\ngateway=10.88.0.1\nroute1=198.51.100.0/24,10.88.0.1,50\ndns=10.88.0.53;\ndns-search=example.com;\n\n" +
			"[ipv6]\nmethod=manual\naddress1=fd00:88::2/64\ndns=fd00:88::53;\n",
	}
	if len(files) != 4 {
		t.Errorf("files: %d, want 4 (port0, port1, bond0, bond0.100)", len(files))
	}
	for name, w := range want {
		if got := string(files[name]); got != w {
			t.Errorf("%s:\n%s\nwant:\n%s", name, got, w)
		}
	}

	dir := filepath.Join(t.TempDir(), "system-connections")
	if err := WriteKeyfiles(dir, cfg); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 4 {
		t.Errorf("%d files written", len(ents))
	}
	for _, e := range ents {
		info, _ := e.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", e.Name(), info.Mode())
		}
	}

	// Matched by MAC alone: no interface-name, so the installed system's
	// own name for the NIC does not matter.
	bym, err := ParseNMState([]byte("interfaces:\n- name: uplink\n  type: ethernet\n  identifier: mac-address\n  mac-address: 52:54:00:12:34:56\n  ipv4: {dhcp: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Keyfiles(bym)
	if got := string(f["uplink.nmconnection"]); err != nil || !strings.HasPrefix(got, "[connection]\nid=uplink\ntype=ethernet\nautoconnect=true\n\n[ethernet]\nmac-address=52:54:00:12:34:56\n") {
		t.Errorf("keyfile matched by MAC: %v\n%s", err, got)
	}

	// DHCP plus a static address, and an unreachable gateway.
	dh, _ := ParseNMState([]byte("interfaces:\n- name: e\n  type: ethernet\n  ipv4: {dhcp: true, address: [{ip: 192.0.2.5, prefix-length: 24}]}\n"))
	f, err = Keyfiles(dh)
	if err != nil || !strings.Contains(string(f["e.nmconnection"]), "[ipv4]\nmethod=auto\naddress1=192.0.2.5/24\n") {
		t.Errorf("dhcp+static: %q %v", f["e.nmconnection"], err)
	}
	bad, _ := ParseNMState([]byte("interfaces:\n- name: e\n  type: ethernet\n  ipv4: {address: [{ip: 192.0.2.5, prefix-length: 24}]}\nroutes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-address: 203.0.113.1}\n"))
	if _, err := Keyfiles(bad); err == nil || !strings.Contains(err.Error(), "no interface reaches the gateway") {
		t.Errorf("unreachable gateway: %v", err)
	}
}

func TestLoadNetworkData(t *testing.T) {
	doc := []byte("interfaces:\n- name: eno1\n  type: ethernet\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(doc)
	zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/nd.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Write(doc)
	}))
	defer srv.Close()
	noFile := func(string) ([]byte, error) { return nil, fs.ErrNotExist }
	withFile := func(p string) ([]byte, error) {
		if p == NetworkDataFile {
			return doc, nil
		}
		return nil, fs.ErrNotExist
	}
	for _, tc := range []struct {
		name, cmdline string
		read          func(string) ([]byte, error)
		src, err      string
	}{
		{"base64", "console=ttyS0 kiln.network_data=" + base64.StdEncoding.EncodeToString(doc), noFile, "kernel command line", ""},
		{"base64 url unpadded", "kiln.network_data=" + base64.RawURLEncoding.EncodeToString(doc), noFile, "kernel command line", ""},
		{"gzip base64", "kiln.network_data=" + base64.StdEncoding.EncodeToString(gz.Bytes()), noFile, "kernel command line", ""},
		{"url", "kiln.network_data_url=" + srv.URL + "/nd.yaml", noFile, srv.URL + "/nd.yaml", ""},
		{"file", "console=ttyS0", withFile, NetworkDataFile, ""},
		{"none", "console=ttyS0", noFile, "", ""},
		{"bad base64", "kiln.network_data=!!!", noFile, "", "decode kiln.network_data"},
		{"url 404", "kiln.network_data_url=" + srv.URL + "/x", noFile, "", "404"},
		{"not http", "kiln.network_data_url=file:///etc/passwd", noFile, "", "not an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, src, err := LoadNetworkData(context.Background(), tc.cmdline, tc.read, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(src, tc.src) {
				t.Errorf("source %q, want %q", src, tc.src)
			}
			if tc.src == "" {
				if b != nil {
					t.Errorf("data %q without a source", b)
				}
				return
			}
			if !bytes.Equal(b, doc) {
				t.Errorf("data %q", b)
			}
		})
	}
}

func TestParseNetworkData(t *testing.T) {
	m := map[string]any{"interfaces": []any{map[string]any{"name": "e", "type": "ethernet", "ipv4": map[string]any{"dhcp": true}}}}
	cfg, err := ParseNetworkData(m)
	if err != nil || len(cfg.Interfaces) != 1 || !cfg.Interfaces[0].IPv4.DHCP {
		t.Errorf("map: %+v %v", cfg, err)
	}
	if _, err := ParseNetworkData(map[string]any{"links": []any{}, "networks": []any{}}); err == nil || !strings.Contains(err.Error(), "OpenStack") {
		t.Errorf("OpenStack layout: %v", err)
	}
	if _, err := ParseNetworkData("interfaces:\n- {name: e, type: ethernet}\n"); err != nil {
		t.Errorf("string: %v", err)
	}
}
