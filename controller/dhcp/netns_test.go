package dhcp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/netnstest"
	"github.com/kilnhq/kiln/test/pgtest"
)

// The packet tests run the server and the library's client (nclient4) in
// two network namespaces joined by a veth pair (test/netnstest): real
// sockets, real broadcasts, nothing of the host's network touched.

type segment = netnstest.Segment

func newSegment(t testing.TB, addr string) segment { return netnstest.New(t, addr) }

func inNS(t testing.TB, name string, fn func()) { netnstest.In(t, name, fn) }

func run(t testing.TB, args ...string) { netnstest.Run(t, args...) }

// observer records what the server decided, so that tests can wait for
// "handled and not answered" instead of waiting out a timeout.
type observer struct {
	mu      sync.Mutex
	handled map[string][]*dhcpv4.DHCPv4 // by MAC; nil entries: not answered
	changed chan struct{}
}

func newObserver() *observer {
	return &observer{handled: map[string][]*dhcpv4.DHCPv4{}, changed: make(chan struct{}, 1)}
}

func (o *observer) observe(r Request, reply *dhcpv4.DHCPv4) {
	o.mu.Lock()
	mac := r.Msg.ClientHWAddr.String()
	o.handled[mac] = append(o.handled[mac], reply)
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// waitHandled waits until n requests of mac were handled and returns the
// replies. The deadline is only a safety net against a hang.
func (o *observer) waitHandled(t testing.TB, mac string, n int) []*dhcpv4.DHCPv4 {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		o.mu.Lock()
		got := append([]*dhcpv4.DHCPv4(nil), o.handled[mac]...)
		o.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-o.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("server handled %d requests from %s, want %d", len(got), mac, n)
		}
	}
}

type running struct {
	srv  *Server
	obs  *observer
	stop func()
}

// startServer starts a server on the segment's server end.
func startServer(t testing.TB, seg segment, cfg ServerConfig) running {
	t.Helper()
	obs := newObserver()
	cfg.Interface = seg.SrvIf
	cfg.Observe = obs.observe
	if cfg.Log == nil && !testing.Verbose() {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ScriptURL == "" {
		cfg.ScriptURL = "http://10.77.0.1:6385/boot/boot.ipxe"
		cfg.HTTPBootURL = "http://10.77.0.1:6385/boot/ipxe/"
	}
	var srv *Server
	var err error
	inNS(t, seg.SrvNS, func() {
		if srv, err = NewServer(cfg); err == nil {
			err = srv.Listen()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return running{srv: srv, obs: obs, stop: stop}
}

func newClient(t testing.TB, seg segment, hw net.HardwareAddr) *nclient4.Client {
	t.Helper()
	var c *nclient4.Client
	var err error
	inNS(t, seg.CliNS, func() {
		opts := []nclient4.ClientOpt{nclient4.WithTimeout(10 * time.Second), nclient4.WithRetry(3)}
		if hw != nil {
			opts = append(opts, nclient4.WithHWAddr(hw))
		}
		c, err = nclient4.New(seg.CliIf, opts...)
	})
	if err != nil {
		t.Fatalf("DHCP client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func hw(i int) net.HardwareAddr {
	return net.HardwareAddr{0x52, 0x54, 0x00, byte(i >> 16), byte(i >> 8), byte(i)}
}

func openStore(t testing.TB, dsn string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func leasesOf(t testing.TB, st store.Store) store.Leases {
	t.Helper()
	l, ok := store.AsLeases(st)
	if !ok {
		t.Fatal("store has no lease table")
	}
	return l
}

var firmwares = []struct {
	name string
	mods []dhcpv4.Modifier
	file string
}{
	{"BIOS", pxe(0), "undionly.kpxe"},
	{"UEFI x86-64", pxe(7), "snponly.efi"},
	{"UEFI BC", pxe(9), "snponly.efi"},
	{"UEFI ARM64", pxe(11), "snponly-arm64.efi"},
	{"UEFI HTTP x86-64", httpBoot(16), "http://10.77.0.1:6385/boot/ipxe/snponly.efi"},
	{"UEFI HTTP ARM64", httpBoot(19), "http://10.77.0.1:6385/boot/ipxe/snponly-arm64.efi"},
	{"iPXE", with(pxe(7), dhcpv4.WithUserClass("iPXE", false)), "http://10.77.0.1:6385/boot/boot.ipxe"},
}

func TestProxyModeOnTheWire(t *testing.T) {
	seg := newSegment(t, "10.77.0.1/24")
	s := startServer(t, seg, ServerConfig{Config: Config{Mode: ModeProxy}})
	ctx := context.Background()
	for i, fw := range firmwares {
		t.Run(fw.name, func(t *testing.T) {
			c := newClient(t, seg, hw(i+1))
			offer, err := c.DiscoverOffer(ctx, fw.mods...)
			if err != nil {
				t.Fatal(err)
			}
			if !offer.YourIPAddr.IsUnspecified() || offer.BootFileName != fw.file || !offer.ServerIdentifier().Equal(net.IPv4(10, 77, 0, 1)) {
				t.Fatalf("offer yiaddr %s file %q server %s; want no address, %q from 10.77.0.1", offer.YourIPAddr, offer.BootFileName, offer.ServerIdentifier(), fw.file)
			}
			if offer.IPAddressLeaseTime(0) != 0 || offer.SubnetMask() != nil {
				t.Fatal("a proxy offer carries lease options")
			}
		})
	}
	t.Run("boot server request on 4011", func(t *testing.T) {
		// PXE clients ask the boot server from the address the site's
		// DHCP server gave them.
		run(t, "ip", "-n", seg.CliNS, "addr", "add", "10.77.0.50/24", "dev", seg.CliIf)
		var c *nclient4.Client
		var err error
		inNS(t, seg.CliNS, func() {
			c, err = nclient4.New(seg.CliIf, nclient4.WithHWAddr(hw(100)), nclient4.WithTimeout(10*time.Second),
				nclient4.WithUnicast(&net.UDPAddr{IP: net.IPv4(10, 77, 0, 50), Port: dhcpv4.ClientPort}))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(hw(100)), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
			dhcpv4.WithClientIP(net.IPv4(10, 77, 0, 50))}, pxe(7)...)...)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := c.SendAndRead(ctx, &net.UDPAddr{IP: net.IPv4(10, 77, 0, 1), Port: PXEPort}, req, nclient4.IsMessageType(dhcpv4.MessageTypeAck))
		if err != nil {
			t.Fatal(err)
		}
		if ack.BootFileName != "snponly.efi" || !ack.YourIPAddr.IsUnspecified() {
			t.Fatalf("ACK file %q yiaddr %s", ack.BootFileName, ack.YourIPAddr)
		}
	})
	t.Run("plain client not answered", func(t *testing.T) {
		c := newClient(t, seg, hw(200))
		disc, err := dhcpv4.NewDiscovery(hw(200), dhcpv4.WithBroadcast(true))
		if err != nil {
			t.Fatal(err)
		}
		go c.SendAndRead(ctx, &net.UDPAddr{IP: net.IPv4bcast, Port: 67}, disc, nil) //nolint:errcheck // no answer is the point
		if got := s.obs.waitHandled(t, hw(200).String(), 1); got[0] != nil {
			t.Fatalf("proxy answered a client that is not booting: %s", got[0].Summary())
		}
	})
}

func TestFullModeOnTheWire(t *testing.T) {
	seg := newSegment(t, "10.77.0.1/24")
	dbFile := t.TempDir() + "/kiln.db"
	st := openStore(t, dbFile)
	cfg := ServerConfig{
		Config: Config{Mode: ModeFull, Routers: []netip.Addr{netip.MustParseAddr("10.77.0.254")},
			DNS: []netip.Addr{netip.MustParseAddr("10.77.0.53")}, LeaseTime: 10 * time.Minute},
		First: netip.MustParseAddr("10.77.0.100"), Last: netip.MustParseAddr("10.77.0.199"),
		Leases: leasesOf(t, st), Ports: st, Conductor: "c1",
	}
	s := startServer(t, seg, cfg)
	ctx := context.Background()
	got := map[string]string{} // MAC → address
	for i, fw := range firmwares {
		t.Run(fw.name, func(t *testing.T) {
			c := newClient(t, seg, hw(i+1))
			lease, err := c.Request(ctx, fw.mods...)
			if err != nil {
				t.Fatal(err)
			}
			ack := lease.ACK
			ip, _ := netip.AddrFromSlice(ack.YourIPAddr.To4())
			if ip.Less(cfg.First) || cfg.Last.Less(ip) {
				t.Fatalf("leased %s, outside the range", ip)
			}
			if ack.BootFileName != fw.file || lease.Offer.BootFileName != fw.file {
				t.Fatalf("boot file %q (offer %q), want %q", ack.BootFileName, lease.Offer.BootFileName, fw.file)
			}
			if fmt.Sprint(ack.Router()) != "[10.77.0.254]" || fmt.Sprint(ack.DNS()) != "[10.77.0.53]" ||
				ack.SubnetMask().String() != "ffffff00" || ack.IPAddressLeaseTime(0) != 10*time.Minute {
				t.Fatalf("options router %v dns %v mask %v lease %v", ack.Router(), ack.DNS(), ack.SubnetMask(), ack.IPAddressLeaseTime(0))
			}
			got[hw(i+1).String()] = ip.String()
		})
	}
	seen := map[string]string{}
	for mac, ip := range got {
		if other, dup := seen[ip]; dup {
			t.Fatalf("%s leased to %s and %s", ip, other, mac)
		}
		seen[ip] = mac
	}

	t.Run("leases survive a restart", func(t *testing.T) {
		s.stop()
		st.Close()
		st2 := openStore(t, dbFile)
		cfg.Leases, cfg.Ports = leasesOf(t, st2), st2
		startServer(t, seg, cfg)
		for i := range firmwares {
			c := newClient(t, seg, hw(i+1))
			lease, err := c.Request(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ip := lease.ACK.YourIPAddr.String(); ip != got[hw(i+1).String()] {
				t.Fatalf("%s got %s after the restart, had %s", hw(i+1), ip, got[hw(i+1).String()])
			}
		}
	})
}

// TestTwoServersOnePostgres runs two servers, each on its own segment, on
// one PostgreSQL database, and has many clients ask both at once: no
// address may go to two MACs.
func TestTwoServersOnePostgres(t *testing.T) {
	dsn := pgDSN(t)
	segs := []segment{newSegment(t, "10.77.0.1/24"), newSegment(t, "10.77.0.2/24")}
	const clients = 24
	var mu sync.Mutex
	owner := map[string]string{}
	var wg sync.WaitGroup
	errc := make(chan error, 2*clients)
	for si, seg := range segs {
		st := openStore(t, dsn)
		startServer(t, seg, ServerConfig{Config: Config{Mode: ModeFull},
			First: netip.MustParseAddr("10.77.0.10"), Last: netip.MustParseAddr("10.77.0.250"),
			Leases: leasesOf(t, st), Conductor: fmt.Sprint("c", si)})
		for i := range clients {
			mac := hw(1000*si + i)
			c := newClient(t, seg, mac)
			wg.Go(func() {
				lease, err := c.Request(context.Background())
				if err != nil {
					errc <- fmt.Errorf("%s: %w", mac, err)
					return
				}
				ip := lease.ACK.YourIPAddr.String()
				mu.Lock()
				defer mu.Unlock()
				if o, dup := owner[ip]; dup {
					errc <- fmt.Errorf("%s given to both %s and %s", ip, o, mac)
				}
				owner[ip] = mac.String()
			})
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if len(owner) != 2*clients {
		t.Fatalf("%d distinct addresses for %d clients", len(owner), 2*clients)
	}
}

func TestProbeFindsServers(t *testing.T) {
	seg := newSegment(t, "10.77.0.1/24")
	st := openStore(t, t.TempDir()+"/kiln.db")
	startServer(t, seg, ServerConfig{Config: Config{Mode: ModeFull},
		First: netip.MustParseAddr("10.77.0.100"), Last: netip.MustParseAddr("10.77.0.199"), Leases: leasesOf(t, st)})
	var found []Answerer
	var err error
	inNS(t, seg.CliNS, func() { found, err = Probe(context.Background(), seg.CliIf, 3*time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Server.String() != "10.77.0.1" || found[0].Proxy {
		t.Fatalf("probe found %+v, want the full server 10.77.0.1", found)
	}
	if len(Conflicts(ModeFull, found)) != 1 || len(Conflicts(ModeProxy, found)) != 0 {
		t.Fatal("a full server conflicts with a full server, not with a proxy beside it")
	}
}

func TestAnswersOnlyOnTheNamedInterface(t *testing.T) {
	seg := newSegment(t, "10.77.0.1/24")
	// A second link into the server's namespace, not named to the server.
	run(t, "ip", "-n", seg.SrvNS, "link", "add", "kiln-other", "type", "veth", "peer", "name", "kiln-cli2", "netns", seg.CliNS)
	run(t, "ip", "-n", seg.SrvNS, "addr", "add", "10.78.0.1/24", "dev", "kiln-other")
	run(t, "ip", "-n", seg.SrvNS, "link", "set", "kiln-other", "up")
	run(t, "ip", "-n", seg.CliNS, "link", "set", "kiln-cli2", "up")
	s := startServer(t, seg, ServerConfig{Config: Config{Mode: ModeProxy}})
	var other *nclient4.Client
	var err error
	inNS(t, seg.CliNS, func() {
		other, err = nclient4.New("kiln-cli2", nclient4.WithHWAddr(hw(7)), nclient4.WithTimeout(time.Second), nclient4.WithRetry(1))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// First ask on the other link, then on the named one; once the
	// named one is answered, the other request has long been delivered.
	if _, err := other.DiscoverOffer(context.Background(), pxe(0)...); err == nil {
		t.Fatal("the server answered on an interface it was not given")
	}
	if _, err := newClient(t, seg, hw(8)).DiscoverOffer(context.Background(), pxe(0)...); err != nil {
		t.Fatal(err)
	}
	s.obs.mu.Lock()
	defer s.obs.mu.Unlock()
	if n := len(s.obs.handled[hw(7).String()]); n != 0 {
		t.Fatalf("the server saw %d requests from the other interface", n)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func pgDSN(t testing.TB) string { return pgtest.DSN(t) }

// knownPorts is a PortLookup holding a fixed set of MACs.
type knownPorts map[string]bool

func (k knownPorts) GetPortByAddress(_ context.Context, mac string) (*proto.Port, error) {
	if k[mac] {
		return &proto.Port{Address: mac}, nil
	}
	return nil, store.ErrNotFound
}

func TestStaticLeaseForAnEnrolledPort(t *testing.T) {
	seg := newSegment(t, "10.77.0.1/24")
	st := openStore(t, t.TempDir()+"/kiln.db")
	leases := leasesOf(t, st)
	startServer(t, seg, ServerConfig{Config: Config{Mode: ModeFull},
		First: netip.MustParseAddr("10.77.0.100"), Last: netip.MustParseAddr("10.77.0.199"),
		Leases: leases, Ports: knownPorts{hw(1).String(): true}})
	for i := 1; i <= 2; i++ {
		if _, err := newClient(t, seg, hw(i)).Request(context.Background(), pxe(0)...); err != nil {
			t.Fatal(err)
		}
	}
	all, err := leases.ListLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	static := map[string]bool{}
	for _, l := range all {
		static[l.MAC] = l.Static
	}
	if len(all) != 2 || !static[hw(1).String()] || static[hw(2).String()] {
		t.Fatalf("leases %+v: want the enrolled MAC's static, the other's dynamic", all)
	}
}

// BenchmarkLeases measures full DHCP exchanges (DISCOVER, OFFER, REQUEST,
// ACK), each for a new MAC, through the library's client against a server
// on a SQLite file: the lease rate one controller sustains.
func BenchmarkLeases(b *testing.B) {
	seg := newSegment(b, "10.77.0.1/16")
	st := openStore(b, b.TempDir()+"/kiln.db")
	startServer(b, seg, ServerConfig{Config: Config{Mode: ModeFull},
		First: netip.MustParseAddr("10.77.1.0"), Last: netip.MustParseAddr("10.77.254.254"), Leases: leasesOf(b, st)})
	// The library's client answers only to its own MAC, so each MAC needs
	// a client (a raw socket), and every raw socket sees every packet: the
	// clients are made, off the clock, in batches of 16 that then ask at once.
	const batch = 16
	ctx := context.Background()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		b.StopTimer()
		clients := make([]*nclient4.Client, min(batch, b.N-done))
		var err error
		inNS(b, seg.CliNS, func() {
			for i := range clients {
				if clients[i], err = nclient4.New(seg.CliIf, nclient4.WithHWAddr(hw(done+i+1)), nclient4.WithTimeout(10*time.Second)); err != nil {
					return
				}
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var wg sync.WaitGroup
		errc := make(chan error, len(clients))
		for _, c := range clients {
			wg.Go(func() {
				if _, err := c.Request(ctx); err != nil {
					errc <- err
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		close(errc)
		for err := range errc {
			b.Fatal(err)
		}
		for _, c := range clients {
			c.Close()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leases/s")
}

// TestRateLimitOnTheWire: a MAC that sends more than its burst gets no
// answer (the server's observer sees the drop, no timeout waited out),
// while another MAC is still answered. The refill interval is an hour, so
// no token comes back while the test runs, however slow the machine.
func TestRateLimitOnTheWire(t *testing.T) {
	seg := newSegment(t, "10.77.0.1/24")
	s := startServer(t, seg, ServerConfig{Config: Config{Mode: ModeProxy}, RateBurst: 2, RateInterval: time.Hour})
	ctx := context.Background()
	flood := hw(1)
	var c *nclient4.Client
	var err error
	inNS(t, seg.CliNS, func() { c, err = nclient4.New(seg.CliIf, nclient4.WithHWAddr(flood), nclient4.WithRetry(1)) })
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		disc, err := dhcpv4.NewDiscovery(flood, with(pxe(0), dhcpv4.WithBroadcast(true))...)
		if err != nil {
			t.Fatal(err)
		}
		go c.SendAndRead(ctx, &net.UDPAddr{IP: net.IPv4bcast, Port: 67}, disc, nil) //nolint:errcheck // answers are counted by the observer
	}
	answered := 0
	for _, r := range s.obs.waitHandled(t, flood.String(), 3) {
		if r != nil {
			answered++
		}
	}
	c.Close() // its reads end; the next client has the link to itself
	if answered != 2 {
		t.Fatalf("%d of 3 requests from %s answered, want the burst of 2", answered, flood)
	}
	offer, err := newClient(t, seg, hw(2)).DiscoverOffer(ctx, pxe(0)...)
	if err != nil {
		t.Fatalf("another MAC was not answered while %s was limited: %v", flood, err)
	}
	if offer.BootFileName != "undionly.kpxe" {
		t.Fatalf("offer to %s names %q, want undionly.kpxe", hw(2), offer.BootFileName)
	}
}
