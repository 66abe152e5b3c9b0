package netconf

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serveTCP listens on addrs inside namespace ns, accepting and closing.
func serveTCP(t *testing.T, ns string, addrs ...string) []string {
	t.Helper()
	var out []string
	for _, a := range addrs {
		var l net.Listener
		inNS(t, ns, func() error {
			var err error
			l, err = net.Listen("tcp", a)
			return err
		})
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		out = append(out, "http://"+l.Addr().String()+"/v1/")
	}
	return out
}

// TestNMStateBondVLANNetns applies an NMState document — a bond of two
// veths with a VLAN on top carrying static IPv4 and IPv6 addresses — and
// reaches servers in the peer namespace over both families.
func TestNMStateBondVLANNetns(t *testing.T) {
	requireNetns(t)
	requireLinkKinds(t, "bond", "vlan")
	srvNS, cliNS := newNS(t, "nsrv"), newNS(t, "ncli")
	// port0 is found by its MAC (the document's mac-address) and renamed
	// from the kernel-style name it starts with.
	ip(t, "-n", cliNS, "link", "add", "eth0", "address", "52:54:00:aa:bb:01", "type", "veth", "peer", "name", "sw0", "netns", srvNS)
	ip(t, "-n", cliNS, "link", "add", "port1", "type", "veth", "peer", "name", "sw1", "netns", srvNS)
	ip(t, "-n", srvNS, "link", "add", "br0", "type", "bridge")
	for _, i := range []string{"0", "1"} {
		ip(t, "-n", srvNS, "link", "set", "sw"+i, "master", "br0")
		ip(t, "-n", srvNS, "link", "set", "sw"+i, "up")
	}
	ip(t, "-n", srvNS, "link", "set", "br0", "up")
	ip(t, "-n", srvNS, "link", "add", "link", "br0", "name", "br0.100", "type", "vlan", "id", "100")
	ip(t, "-n", srvNS, "addr", "add", "10.88.0.1/24", "dev", "br0.100")
	ip(t, "-n", srvNS, "addr", "add", "fd00:88::1/64", "dev", "br0.100", "nodad")
	ip(t, "-n", srvNS, "link", "set", "br0.100", "up")
	reach := serveTCP(t, srvNS, "10.88.0.1:0", "[fd00:88::1]:0")

	cfg, err := ParseNMState([]byte(bondVLANYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DNS.ResolvConf = filepath.Join(t.TempDir(), "resolv.conf")
	if _, err := runHelperIn(t, cliNS, "apply", applyArg{Config: cfg, Reach: reach}); err != nil {
		t.Fatalf("apply and reach: %v", err)
	}
	if p := ipOut(t, "-n", cliNS, "link", "show", "port0"); !strings.Contains(p, "master bond0") {
		t.Errorf("port0 (eth0 renamed by MAC):\n%s", p)
	}
	if bond := ipOut(t, "-n", cliNS, "-d", "link", "show", "bond0"); !strings.Contains(bond, "mode active-backup") {
		t.Errorf("bond0:\n%s", bond)
	}
	if r := ipOut(t, "-n", cliNS, "route", "show", "default"); !strings.Contains(r, "via 10.88.0.1 dev bond0.100") {
		t.Errorf("default route:\n%s", r)
	}
}

// TestNMStateStaticNetns needs no bonding or VLAN driver: an ethernet link
// with static IPv4 and IPv6 addresses, a default route and an extra route
// from an NMState JSON document, then TCP to the peer over both families.
func TestNMStateStaticNetns(t *testing.T) {
	requireNetns(t)
	srvNS, cliNS := newNS(t, "nssrv"), newNS(t, "nscli")
	// The cable is on eth5; the document calls it eno1 and gives its MAC,
	// and another link already has the name eno1.
	ip(t, "-n", cliNS, "link", "add", "eth5", "address", "52:54:00:87:00:02", "type", "veth", "peer", "name", "peer0", "netns", srvNS)
	ip(t, "-n", cliNS, "link", "add", "eno1", "type", "veth", "peer", "name", "eno1p")
	ip(t, "-n", srvNS, "addr", "add", "10.87.0.1/24", "dev", "peer0")
	ip(t, "-n", srvNS, "addr", "add", "fd00:87::1/64", "dev", "peer0", "nodad")
	ip(t, "-n", srvNS, "addr", "add", "203.0.113.9/32", "dev", "lo")
	ip(t, "-n", srvNS, "link", "set", "peer0", "up")
	reach := serveTCP(t, srvNS, "10.87.0.1:0", "[fd00:87::1]:0", "203.0.113.9:0")
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	doc := `{"interfaces":[{"name":"eno1","type":"ethernet","state":"up","mtu":1450,"mac-address":"52:54:00:87:00:02",
	  "ipv4":{"enabled":true,"dhcp":false,"address":[{"ip":"10.87.0.2","prefix-length":24}]},
	  "ipv6":{"enabled":true,"dhcp":false,"autoconf":false,"address":[{"ip":"fd00:87::2","prefix-length":64}]}}],
	 "routes":{"config":[{"destination":"0.0.0.0/0","next-hop-address":"10.87.0.1","next-hop-interface":"eno1"},
	   {"destination":"203.0.113.0/24","next-hop-address":"10.87.0.1","next-hop-interface":"eno1","metric":20}]},
	 "dns-resolver":{"config":{"server":["10.87.0.53"],"search":["lab.example"]}}}`
	cfg, err := ParseNMState([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DNS.ResolvConf = resolv
	if _, err := runHelperIn(t, cliNS, "apply", applyArg{Config: cfg, Reach: reach}); err != nil {
		t.Fatalf("apply and reach: %v", err)
	}
	if s := ipOut(t, "-n", cliNS, "link", "show", "eno1"); !strings.Contains(s, "mtu 1450") || !strings.Contains(s, "52:54:00:87:00:02") {
		t.Errorf("eno1:\n%s", s)
	}
	if r := ipOut(t, "-n", cliNS, "route", "show", "203.0.113.0/24"); !strings.Contains(r, "via 10.87.0.1 dev eno1") || !strings.Contains(r, "metric 20") {
		t.Errorf("route:\n%s", r)
	}
	if b, err := os.ReadFile(resolv); err != nil || !strings.Contains(string(b), "nameserver 10.87.0.53") || !strings.Contains(string(b), "search lab.example") {
		t.Errorf("resolv.conf %q %v", b, err)
	}
}

// TestApplyNetworkDataNetns: the whole static path — a document from the
// initramfs file, applied in a namespace, keyfiles written.
func TestApplyNetworkDataNetns(t *testing.T) {
	requireNetns(t)
	ns := newNS(t, "nd")
	ip(t, "-n", ns, "link", "add", "eno7", "type", "veth", "peer", "name", "eno7p")
	ip(t, "-n", ns, "link", "set", "eno7p", "up")
	doc := "interfaces:\n- name: eno7\n  type: ethernet\n  ipv4:\n    address: [{ip: 10.86.0.2, prefix-length: 24}]\n" +
		"routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-address: 10.86.0.1}\n" +
		"dns-resolver:\n  config: {server: [10.86.0.53]}\n"
	dir := t.TempDir()
	keyDir := filepath.Join(dir, "system-connections")
	read := func(p string) ([]byte, error) {
		if p != NetworkDataFile {
			t.Errorf("read %s", p)
		}
		return []byte(doc), nil
	}
	inNS(t, ns, func() error {
		ok, err := ApplyNetworkData(t.Context(), NetworkDataOptions{Cmdline: "console=ttyS0", ReadFile: read,
			KeyfileDir: keyDir, ResolvConf: filepath.Join(dir, "resolv.conf")})
		if err == nil && !ok {
			t.Error("network data not applied")
		}
		return err
	})
	if a := ipOut(t, "-n", ns, "addr", "show", "eno7"); !strings.Contains(a, "10.86.0.2/24") {
		t.Errorf("eno7:\n%s", a)
	}
	if r := ipOut(t, "-n", ns, "route", "show", "default"); !strings.Contains(r, "via 10.86.0.1 dev eno7") {
		t.Errorf("default route:\n%s", r)
	}
	if b, err := os.ReadFile(filepath.Join(keyDir, "eno7.nmconnection")); err != nil || !strings.Contains(string(b), "address1=10.86.0.2/24\ngateway=10.86.0.1\ndns=10.86.0.53;\n") {
		t.Errorf("keyfile %q %v", b, err)
	}

	// No document: nothing applied, no error.
	ok, err := ApplyNetworkData(t.Context(), NetworkDataOptions{ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }})
	if ok || err != nil {
		t.Errorf("without data: %v %v", ok, err)
	}
}
