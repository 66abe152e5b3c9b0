package dhcp

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"github.com/insomniacslk/dhcp/iana"
)

// startServer6 runs a DHCPv6 server on the segment's server end, which gets
// fd77::1/64 (without duplicate address detection, so it is usable at once).
func startServer6(t *testing.T, seg segment, mode Mode) *Server6 {
	t.Helper()
	return startServer6With(t, seg, Server6Config{Config6: Config6{Mode: mode}})
}

// startServer6With is startServer6 with more of the configuration.
func startServer6With(t *testing.T, seg segment, cfg Server6Config) *Server6 {
	t.Helper()
	run(t, "ip", "-n", seg.SrvNS, "addr", "add", "fd77::1/64", "dev", seg.SrvIf, "nodad")
	run(t, "ip", "netns", "exec", seg.CliNS, "sysctl", "-qw", "net.ipv6.conf."+seg.CliIf+".accept_dad=0")
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.Default()
	}
	var srv *Server6
	var err error
	inNS(t, seg.SrvNS, func() {
		cfg.ScriptURL, cfg.HTTPBootURL = "http://10.77.0.1:6385/boot/boot.ipxe", "http://[fd77::1]:6385/boot/ipxe/"
		cfg.Interface, cfg.Log = seg.SrvIf, log
		srv, err = NewServer6(cfg)
		if err == nil {
			err = srv.Listen()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

func newClient6(t *testing.T, seg segment) *nclient6.Client {
	t.Helper()
	var c *nclient6.Client
	var err error
	inNS(t, seg.CliNS, func() {
		// The client's link-local address must exist before it can send.
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err = nclient6.New(seg.CliIf, nclient6.WithTimeout(2*time.Second), nclient6.WithRetry(10))
			if err == nil || time.Now().After(deadline) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err != nil {
		t.Fatalf("DHCPv6 client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDHCPv6OnTheWire: the library's client, over a veth pair, as UEFI PXE
// firmware: Solicit → Advertise with an address in the /64 and the TFTP
// boot file URL; Request → Reply with the same address. In proxy mode the
// boot file URL comes without an address.
func TestDHCPv6OnTheWire(t *testing.T) {
	for _, mode := range []Mode{ModeFull, ModeProxy} {
		t.Run(string(mode), func(t *testing.T) {
			seg := newSegment(t, "10.77.0.1/24")
			startServer6(t, seg, mode)
			c := newClient6(t, seg)
			ctx := context.Background()
			boot := []dhcpv6.Modifier{dhcpv6.WithArchType(iana.EFI_X86_64), withVendorClass("PXEClient:Arch:00007:UNDI:003016")}
			var adv *dhcpv6.Message
			var err error
			inNS(t, seg.CliNS, func() { adv, err = c.Solicit(ctx, boot...) })
			if err != nil {
				t.Fatalf("solicit: %v", err)
			}
			if got := adv.Options.BootFileURL(); got != "tftp://[fd77::1]/snponly.efi" {
				t.Fatalf("boot file URL %q", got)
			}
			ia := adv.Options.OneIANA()
			if mode == ModeProxy {
				if ia != nil {
					t.Fatalf("proxy mode offered an address: %v", ia)
				}
				return
			}
			if ia == nil || ia.Options.OneAddress() == nil {
				t.Fatalf("no address offered: %s", adv.Summary())
			}
			offered, _ := netip.AddrFromSlice(ia.Options.OneAddress().IPv6Addr)
			if !netip.MustParsePrefix("fd77::/64").Contains(offered) {
				t.Fatalf("offered %s outside fd77::/64", offered)
			}
			var reply *dhcpv6.Message
			inNS(t, seg.CliNS, func() { reply, err = c.Request(ctx, adv, boot...) })
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			got := reply.Options.OneIANA().Options.OneAddress().IPv6Addr
			if !got.Equal(net.IP(offered.AsSlice())) || reply.Options.BootFileURL() == "" {
				t.Fatalf("reply %s: address %s, want %s, and the boot file URL", reply.Summary(), got, offered)
			}
		})
	}
}

// TestDHCPv6RateLimitOnTheWire: a client DUID that solicits more than its
// burst is not answered, another DUID is. The server's observer counts the
// answers, so no timeout is waited out; the refill interval is an hour.
func TestDHCPv6RateLimitOnTheWire(t *testing.T) {
	seg := newSegment(t, "10.77.0.1/24")
	type seen struct {
		duid     string
		answered bool
	}
	obs := make(chan seen, 256) // room for the client's retries too
	startServer6With(t, seg, Server6Config{Config6: Config6{Mode: ModeProxy}, RateBurst: 2, RateInterval: time.Hour,
		Observe: func(m, reply *dhcpv6.Message) { obs <- seen{string(m.Options.ClientID().ToBytes()), reply != nil} }})
	c := newClient6(t, seg)
	boot := []dhcpv6.Modifier{dhcpv6.WithArchType(iana.EFI_X86_64), withVendorClass("PXEClient:Arch:00007:UNDI:003016")}
	solicit := func(mac net.HardwareAddr) *dhcpv6.Message {
		m, err := dhcpv6.NewSolicit(mac, boot...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	flood, other := net.HardwareAddr{0x52, 0x54, 0, 0, 6, 1}, net.HardwareAddr{0x52, 0x54, 0, 0, 6, 2}
	ctx := context.Background()
	floodCtx, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	for range 3 {
		go c.SendAndRead(floodCtx, nclient6.AllDHCPRelayAgentsAndServers, solicit(flood), nil) //nolint:errcheck // answers are counted by the observer
	}
	answered := map[string]int{}
	handled := map[string]int{}
	floodID := string(solicit(flood).Options.ClientID().ToBytes())
	deadline := time.After(30 * time.Second) // a safety net against a hang
	for handled[floodID] < 3 {
		select {
		case s := <-obs:
			handled[s.duid]++
			if s.answered {
				answered[s.duid]++
			}
		case <-deadline:
			t.Fatalf("the server handled %d solicits from the flooding client, want 3", handled[floodID])
		}
	}
	stopFlood() // no retries of the dropped one from here on
	if answered[floodID] != 2 {
		t.Fatalf("%d of 3 solicits from one DUID answered, want the burst of 2", answered[floodID])
	}
	var adv *dhcpv6.Message
	var err error
	inNS(t, seg.CliNS, func() {
		adv, err = c.SendAndRead(ctx, nclient6.AllDHCPRelayAgentsAndServers, solicit(other), nclient6.IsMessageType(dhcpv6.MessageTypeAdvertise))
	})
	if err != nil {
		t.Fatalf("another DUID was not answered while the first was limited: %v", err)
	}
	if got := adv.Options.BootFileURL(); got != "tftp://[fd77::1]/snponly.efi" {
		t.Fatalf("boot file URL %q", got)
	}
}
