package netconf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/server6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/vishvananda/netns"
)

// The namespace tests run Bringup/Apply in a child process started with
// "ip netns exec", so that the test binary's own namespace (the host's) is
// never reconfigured. TestMain turns the child into the helper.
func TestMain(m *testing.M) {
	if h := os.Getenv("KILN_NETCONF_HELPER"); h != "" {
		if err := runHelper(h, os.Getenv("KILN_NETCONF_ARG")); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type applyArg struct {
	Config       Config
	Reach        []string
	ReachTimeout time.Duration
}

func runHelper(name, arg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	switch name {
	case "bringup":
		var opts BringupOptions
		if err := json.Unmarshal([]byte(arg), &opts); err != nil {
			return err
		}
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		res, err := Bringup(ctx, opts)
		if err != nil {
			return err
		}
		if res.DHCPv6Done != nil {
			<-res.DHCPv6Done // the process's end would cut the background exchange short
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	case "apply":
		var a applyArg
		if err := json.Unmarshal([]byte(arg), &a); err != nil {
			return err
		}
		if err := Apply(ctx, a.Config); err != nil {
			return err
		}
		// Applying twice must be harmless.
		if err := Apply(ctx, a.Config); err != nil {
			return fmt.Errorf("second Apply: %w", err)
		}
		if a.ReachTimeout == 0 {
			a.ReachTimeout = 20 * time.Second
		}
		for _, u := range a.Reach {
			if err := WaitReachable(ctx, u, a.ReachTimeout); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown helper %q", name)
}

// requireNetns skips when iproute2 or network namespaces are truly absent.
func requireNetns(t *testing.T) {
	t.Helper()
	testtool.Need(t, "ip")
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	probe := fmt.Sprintf("kiln-probe-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("network namespaces unsupported: %v: %s", err, out)
	}
	_ = exec.Command("ip", "netns", "del", probe).Run()
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func ipOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// requireLinkKinds skips when the kernel lacks a link driver (some CI
// kernels are built without CONFIG_BONDING or CONFIG_VLAN_8021Q and without
// modules).
func requireLinkKinds(t *testing.T, kinds ...string) {
	t.Helper()
	ns := newNS(t, "kinds")
	for _, k := range kinds {
		args := []string{"-n", ns, "link", "add", "probe-" + k, "type", k}
		if k == "vlan" {
			// loopback cannot carry VLANs: probe on a veth.
			ip(t, "-n", ns, "link", "add", "probe-a", "type", "veth", "peer", "name", "probe-b")
			args = []string{"-n", ns, "link", "add", "link", "probe-a", "name", "probe-vlan", "type", "vlan", "id", "2"}
		}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("kernel cannot create %s links (driver absent): %v: %s", k, err, strings.TrimSpace(string(out)))
		}
	}
}

// newNS creates a named network namespace removed at the end of the test.
func newNS(t *testing.T, suffix string) string {
	t.Helper()
	name := fmt.Sprintf("kiln-%s-%d", suffix, os.Getpid())
	ip(t, "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	ip(t, "-n", name, "link", "set", "lo", "up")
	return name
}

// inNS runs fn on an OS thread switched into namespace ns. The thread stays
// locked and dies with its goroutine, so no other goroutine inherits the
// namespace. Sockets fn opens stay in ns.
func inNS(t *testing.T, ns string, fn func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(ns)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in namespace %s: %v", ns, err)
	}
}

// runHelperIn runs a helper in namespace ns and returns its stdout.
func runHelperIn(t *testing.T, ns, helper string, arg any) (string, error) {
	t.Helper()
	b, err := json.Marshal(arg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KILN_NETCONF_HELPER="+helper, "KILN_NETCONF_ARG="+string(b))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if os.Getenv("KILN_NETCONF_DEBUG") != "" {
		cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	}
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), err
}

// TestBringupDHCP boots a two-link "machine" in a namespace: Bringup must
// pick the BOOTIF link, get a DHCPv4 lease and then a DHCPv6 one from servers
// in the peer namespace, and apply addresses, default route and DNS.
func TestBringupDHCP(t *testing.T) {
	t.Run("DHCPv6 waited for", func(t *testing.T) { testBringupDHCP(t, false) })
	t.Run("DHCPv6 in the background", func(t *testing.T) { testBringupDHCP(t, true) })
}

func testBringupDHCP(t *testing.T, background bool) {
	requireNetns(t)
	srvNS, cliNS := newNS(t, "dsrv"), newNS(t, "dcli")
	// Two links in the client: an idle one without carrier first in kernel
	// order, and the BOOTIF one wired to the DHCP server.
	ip(t, "-n", cliNS, "link", "add", "idle0", "type", "veth", "peer", "name", "idle1")
	ip(t, "-n", cliNS, "link", "add", "boot0", "address", "02:00:00:00:77:50", "type", "veth", "peer", "name", "dhcpsrv", "netns", srvNS)
	ip(t, "-n", srvNS, "addr", "add", "10.77.0.1/24", "dev", "dhcpsrv")
	ip(t, "-n", srvNS, "addr", "add", "fe80::1/64", "dev", "dhcpsrv", "nodad")
	ip(t, "-n", srvNS, "addr", "add", "fd00:77::1/64", "dev", "dhcpsrv", "nodad")
	ip(t, "-n", srvNS, "link", "set", "dhcpsrv", "up")

	var srv *server4.Server
	var srv6 *server6.Server
	inNS(t, srvNS, func() error {
		var err error
		srv, err = server4.NewServer("dhcpsrv", &net.UDPAddr{IP: net.IPv4zero, Port: dhcpv4.ServerPort}, leaseHandler(t))
		if err != nil {
			return err
		}
		srv6, err = server6.NewServer("dhcpsrv", nil, lease6Handler(t))
		return err
	})
	go func() { _ = srv.Serve() }()
	defer srv.Close()
	go func() { _ = srv6.Serve() }()
	defer srv6.Close()

	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	out, err := runHelperIn(t, cliNS, "bringup", BringupOptions{
		BootIF: "01-02-00-00-00-77-50", Links: []string{"idle0", "boot0"}, ResolvConf: resolv,
		CarrierTimeout: 5 * time.Second, DHCPTimeout: 15 * time.Second, DHCPv6Timeout: 2 * time.Second,
		DHCPv6Background: background,
	})
	if err != nil {
		t.Fatalf("bringup: %v", err)
	}
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("decode result %q: %v", out, err)
	}
	// In the background, Bringup returned with the DHCPv4 lease alone; the
	// helper waited for the DHCPv6 one before exiting.
	wantLeases := 2
	if background {
		wantLeases = 1
	}
	if res.Interface != "boot0" || len(res.Leases) != wantLeases || res.Leases[0].Address != netip.MustParsePrefix("10.77.0.50/24") ||
		res.Leases[0].Gateway != netip.MustParseAddr("10.77.0.1") || (!background && res.Leases[1].Address != netip.MustParsePrefix("fd00:77::50/128")) {
		t.Errorf("result %+v", res)
	}
	if addrs := ipOut(t, "-n", cliNS, "-6", "addr", "show", "dev", "boot0"); !strings.Contains(addrs, "fd00:77::50/128") {
		t.Errorf("DHCPv6 address not on boot0:\n%s", addrs)
	}
	if addrs := ipOut(t, "-n", cliNS, "-4", "addr", "show", "dev", "boot0"); !strings.Contains(addrs, "10.77.0.50/24") {
		t.Errorf("lease address not on boot0:\n%s", addrs)
	}
	if routes := ipOut(t, "-n", cliNS, "route", "show", "default"); !strings.Contains(routes, "via 10.77.0.1 dev boot0") {
		t.Errorf("no default route via the gateway:\n%s", routes)
	}
	if links := ipOut(t, "-n", cliNS, "link", "show", "idle0"); !strings.Contains(links, "UP") {
		t.Errorf("idle0 was not set up:\n%s", links)
	}
	got, err := os.ReadFile(resolv)
	if err != nil {
		t.Fatal(err)
	}
	if want := "nameserver 10.77.0.53\nnameserver fd00:77::53\nsearch lab.example\n"; !strings.Contains(string(got), want) {
		t.Errorf("resolv.conf:\n%s\nwant it to contain\n%s", got, want)
	}
}

// leaseHandler answers DISCOVER and REQUEST with 10.77.0.50/24.
func leaseHandler(t *testing.T) server4.Handler {
	return func(conn net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4) {
		var typ dhcpv4.MessageType
		switch m.MessageType() {
		case dhcpv4.MessageTypeDiscover:
			typ = dhcpv4.MessageTypeOffer
		case dhcpv4.MessageTypeRequest:
			typ = dhcpv4.MessageTypeAck
		default:
			return
		}
		reply, err := dhcpv4.NewReplyFromRequest(m,
			dhcpv4.WithMessageType(typ),
			dhcpv4.WithYourIP(net.IPv4(10, 77, 0, 50)),
			dhcpv4.WithServerIP(net.IPv4(10, 77, 0, 1)),
			dhcpv4.WithNetmask(net.CIDRMask(24, 32)),
			dhcpv4.WithLeaseTime(3600),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 77, 0, 1))),
			dhcpv4.WithOption(dhcpv4.OptRouter(net.IPv4(10, 77, 0, 1))),
			dhcpv4.WithOption(dhcpv4.OptDNS(net.IPv4(10, 77, 0, 53))),
			dhcpv4.WithDomainSearchList("lab.example"),
		)
		if err != nil {
			t.Errorf("build reply: %v", err)
			return
		}
		if _, err := conn.WriteTo(reply.ToBytes(), peer); err != nil {
			t.Errorf("send reply: %v", err)
		}
	}
}

// lease6Handler answers SOLICIT and REQUEST with fd00:77::50.
func lease6Handler(t *testing.T) server6.Handler {
	return func(conn net.PacketConn, peer net.Addr, m dhcpv6.DHCPv6) {
		msg, err := m.GetInnerMessage()
		if err != nil {
			return
		}
		iaid := [4]byte{}
		if ia := msg.Options.OneIANA(); ia != nil {
			iaid = ia.IaId
		}
		mods := []dhcpv6.Modifier{
			dhcpv6.WithServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0x77, 1}}),
			dhcpv6.WithIAID(iaid),
			dhcpv6.WithIANA(dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP("fd00:77::50"), PreferredLifetime: time.Hour, ValidLifetime: time.Hour}),
			dhcpv6.WithDNS(net.ParseIP("fd00:77::53")),
		}
		var reply *dhcpv6.Message
		switch msg.Type() {
		case dhcpv6.MessageTypeSolicit:
			reply, err = dhcpv6.NewAdvertiseFromSolicit(msg, mods...)
		case dhcpv6.MessageTypeRequest:
			reply, err = dhcpv6.NewReplyFromMessage(msg, mods...)
		default:
			return
		}
		if err != nil {
			t.Errorf("build DHCPv6 reply: %v", err)
			return
		}
		if _, err := conn.WriteTo(reply.ToBytes(), peer); err != nil {
			t.Errorf("send DHCPv6 reply: %v", err)
		}
	}
}

// TestApplyBondVLAN applies a bond of two veths with a VLAN on top carrying
// static IPv4 and IPv6 addresses, then reaches TCP servers in the peer
// namespace over both families.
func TestApplyBondVLAN(t *testing.T) {
	requireNetns(t)
	requireLinkKinds(t, "bond", "vlan")
	srvNS, cliNS := newNS(t, "bsrv"), newNS(t, "bcli")
	for _, i := range []string{"0", "1"} {
		ip(t, "-n", cliNS, "link", "add", "port"+i, "type", "veth", "peer", "name", "sw"+i, "netns", srvNS)
	}
	// The server side: a bridge over both veth ends, VLAN 100 on the bridge.
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

	var l4, l6 net.Listener
	inNS(t, srvNS, func() error {
		var err error
		if l4, err = net.Listen("tcp4", "10.88.0.1:0"); err != nil {
			return err
		}
		l6, err = net.Listen("tcp6", "[fd00:88::1]:0")
		return err
	})
	for _, l := range []net.Listener{l4, l6} {
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}

	p := netip.MustParsePrefix
	cfg := Config{
		Interfaces: []Interface{
			{Name: "port0", Type: Ethernet}, {Name: "port1", Type: Ethernet},
			{Name: "bond0", Type: Bond, MTU: 1400, Bond: BondConfig{Mode: "active-backup", Ports: []string{"port0", "port1"}}},
			{Name: "bond0.100", Type: VLAN, VLAN: VLANConfig{Base: "bond0", ID: 100},
				IPv4: IPConfig{Addresses: []netip.Prefix{p("10.88.0.2/24")}},
				IPv6: IPConfig{Addresses: []netip.Prefix{p("fd00:88::2/64")}}},
		},
		Routes: []Route{{Destination: p("198.51.100.0/24"), Gateway: netip.MustParseAddr("10.88.0.1")}},
		DNS:    DNS{Servers: []netip.Addr{netip.MustParseAddr("10.88.0.53")}, ResolvConf: filepath.Join(t.TempDir(), "resolv.conf")},
	}
	_, err := runHelperIn(t, cliNS, "apply", applyArg{Config: cfg, Reach: []string{
		"http://" + l4.Addr().String() + "/v1/", "http://" + l6.Addr().String() + "/v1/",
	}})
	if err != nil {
		t.Fatalf("apply and reach: %v", err)
	}
	bond := ipOut(t, "-n", cliNS, "-d", "link", "show", "bond0")
	if !strings.Contains(bond, "mode active-backup") || !strings.Contains(bond, "mtu 1400") {
		t.Errorf("bond0:\n%s", bond)
	}
	for _, port := range []string{"port0", "port1"} {
		if s := ipOut(t, "-n", cliNS, "link", "show", port); !strings.Contains(s, "master bond0") {
			t.Errorf("%s not enslaved:\n%s", port, s)
		}
	}
	if vlan := ipOut(t, "-n", cliNS, "-d", "link", "show", "bond0.100"); !strings.Contains(vlan, "vlan protocol 802.1Q id 100") {
		t.Errorf("bond0.100:\n%s", vlan)
	}
	if r := ipOut(t, "-n", cliNS, "route", "show", "198.51.100.0/24"); !strings.Contains(r, "via 10.88.0.1 dev bond0.100") {
		t.Errorf("static route:\n%s", r)
	}
	if b, err := os.ReadFile(cfg.DNS.ResolvConf); err != nil || !strings.Contains(string(b), "nameserver 10.88.0.53") {
		t.Errorf("resolv.conf: %q, %v", b, err)
	}
}

// TestApplyStatic applies static IPv4 and IPv6 addresses, an MTU and a route
// on a plain link and reaches TCP servers in the peer namespace.
func TestApplyStatic(t *testing.T) {
	requireNetns(t)
	srvNS, cliNS := newNS(t, "ssrv"), newNS(t, "scli")
	ip(t, "-n", cliNS, "link", "add", "nic0", "type", "veth", "peer", "name", "peer0", "netns", srvNS)
	ip(t, "-n", srvNS, "addr", "add", "10.89.0.1/24", "dev", "peer0")
	ip(t, "-n", srvNS, "addr", "add", "fd00:89::1/64", "dev", "peer0", "nodad")
	ip(t, "-n", srvNS, "link", "set", "peer0", "up")
	var l4, l6 net.Listener
	inNS(t, srvNS, func() error {
		var err error
		if l4, err = net.Listen("tcp4", "10.89.0.1:0"); err != nil {
			return err
		}
		l6, err = net.Listen("tcp6", "[fd00:89::1]:0")
		return err
	})
	defer l4.Close()
	defer l6.Close()

	p := netip.MustParsePrefix
	cfg := StaticConfig(IPArg{Method: MethodStatic, Address: p("10.89.0.2/24"), Gateway: netip.MustParseAddr("10.89.0.1")}, "nic0")
	cfg.Interfaces[0].MTU = 1400
	cfg.Interfaces[0].IPv6.Addresses = []netip.Prefix{p("fd00:89::2/64")}
	cfg.Routes = append(cfg.Routes, Route{Destination: p("2001:db8:5::/48"), Gateway: netip.MustParseAddr("fd00:89::1")})
	_, err := runHelperIn(t, cliNS, "apply", applyArg{Config: cfg, Reach: []string{
		"http://" + l4.Addr().String(), "https://" + l6.Addr().String(),
	}})
	if err != nil {
		t.Fatalf("apply and reach: %v", err)
	}
	if s := ipOut(t, "-n", cliNS, "link", "show", "nic0"); !strings.Contains(s, "mtu 1400") || !strings.Contains(s, "UP") {
		t.Errorf("nic0:\n%s", s)
	}
	if r := ipOut(t, "-n", cliNS, "route", "show", "default"); !strings.Contains(r, "via 10.89.0.1 dev nic0") {
		t.Errorf("default route:\n%s", r)
	}
	if r := ipOut(t, "-n", cliNS, "-6", "route", "show", "2001:db8:5::/48"); !strings.Contains(r, "via fd00:89::1 dev nic0") {
		t.Errorf("IPv6 route:\n%s", r)
	}

	// An unreachable API gives up within the timeout with a clear error.
	_, err = runHelperIn(t, cliNS, "apply", applyArg{Config: cfg, Reach: []string{"http://10.89.0.1:1"}, ReachTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "not reachable") {
		t.Errorf("unreachable API: %v", err)
	}
}

// TestBringupStaticIPArg configures a link from a kernel ip= argument.
func TestBringupStaticIPArg(t *testing.T) {
	requireNetns(t)
	srvNS, cliNS := newNS(t, "isrv"), newNS(t, "icli")
	ip(t, "-n", cliNS, "link", "add", "nicS", "type", "veth", "peer", "name", "peerS", "netns", srvNS)
	ip(t, "-n", srvNS, "link", "set", "peerS", "up")
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	out, err := runHelperIn(t, cliNS, "bringup", BringupOptions{
		IPArg: "10.90.0.2::10.90.0.1:255.255.255.0:node:nicS:off:10.90.0.53", Links: []string{"nicS"},
		ResolvConf: resolv, CarrierTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("bringup: %v", err)
	}
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Interface != "nicS" || res.Static == nil || len(res.Leases) != 0 {
		t.Errorf("result %+v", res)
	}
	if a := ipOut(t, "-n", cliNS, "-4", "addr", "show", "dev", "nicS"); !strings.Contains(a, "10.90.0.2/24") {
		t.Errorf("address:\n%s", a)
	}
	if r := ipOut(t, "-n", cliNS, "route", "show", "default"); !strings.Contains(r, "via 10.90.0.1 dev nicS") {
		t.Errorf("default route:\n%s", r)
	}
	if b, err := os.ReadFile(resolv); err != nil || !strings.Contains(string(b), "nameserver 10.90.0.53") {
		t.Errorf("resolv.conf %q, %v", b, err)
	}

	// ip=off only sets links up.
	out, err = runHelperIn(t, cliNS, "bringup", BringupOptions{IPArg: "off", Links: []string{"nicS"}})
	if err != nil || !strings.Contains(out, `"Interface":""`) {
		t.Errorf("ip=off: %s, %v", out, err)
	}
}
