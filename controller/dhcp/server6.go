package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/server6"
	"github.com/insomniacslk/dhcp/iana"
	"golang.org/x/net/ipv6"
)

// Server6Config configures a DHCPv6 boot server.
type Server6Config struct {
	Config6
	// Interface is the only interface answered on (the socket is bound to
	// it).
	Interface string
	Log       *slog.Logger
	// RateBurst answers per client DUID, then one per RateInterval; 0
	// disables.
	RateBurst    int
	RateInterval time.Duration
	Now          func() time.Time
	// Observe, if set, sees every message handled and the reply (nil when
	// none).
	Observe func(m, reply *dhcpv6.Message)
}

// Server6 answers DHCPv6 on one interface.
type Server6 struct {
	cfg   Server6Config
	log   *slog.Logger
	limit *rateLimiter
	conn  net.PacketConn
}

// ErrNoIPv6 is NewServer6's answer on an interface without a global or
// unique-local IPv6 address: boot file URLs need one.
var ErrNoIPv6 = errors.New("no global or unique-local IPv6 address")

// NewServer6 checks cfg; an unset ServerIP, Prefix or ServerID is taken
// from the interface (its first global or unique-local address, that
// address's /64, a link-layer DUID of its MAC).
func NewServer6(cfg Server6Config) (*Server6, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Interface == "" {
		return nil, errors.New("dhcp6: no interface named (--dhcp-interface)")
	}
	if cfg.Mode != ModeProxy && cfg.Mode != ModeFull {
		return nil, fmt.Errorf("dhcp6: mode %q: want proxy or full", cfg.Mode)
	}
	ifc, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("dhcp6: interface %s: %w", cfg.Interface, err)
	}
	if !cfg.ServerIP.IsValid() {
		if cfg.ServerIP, err = InterfaceIPv6(ifc); err != nil {
			return nil, err
		}
	}
	if !cfg.Prefix.IsValid() {
		cfg.Prefix = netip.PrefixFrom(cfg.ServerIP, 64).Masked()
	}
	if cfg.Mode == ModeFull && cfg.Prefix.Bits() != 64 {
		return nil, fmt.Errorf("dhcp6: addresses are made in a /64, not %s", cfg.Prefix)
	}
	if cfg.ServerID == nil {
		if len(ifc.HardwareAddr) == 0 {
			return nil, fmt.Errorf("dhcp6: %s has no link-layer address for the server DUID", cfg.Interface)
		}
		cfg.ServerID = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: ifc.HardwareAddr}
	}
	if cfg.RateInterval <= 0 {
		cfg.RateInterval = time.Second
	}
	return &Server6{cfg: cfg, log: cfg.Log.With("interface", cfg.Interface, "dhcp6", string(cfg.Mode)),
		limit: newRateLimiter(cfg.RateBurst, cfg.RateInterval, cfg.Now)}, nil
}

// InterfaceIPv6 is the first global or unique-local IPv6 address of ifc.
func InterfaceIPv6(ifc *net.Interface) (netip.Addr, error) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("dhcp6: addresses of %s: %w", ifc.Name, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if ok && ip.Is6() && !ip.Is4In6() && (ip.IsGlobalUnicast() || ip.IsPrivate()) {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("dhcp6: %s has %w", ifc.Name, ErrNoIPv6)
}

// ServerIP is the address boot file URLs name.
func (s *Server6) ServerIP() netip.Addr { return s.cfg.ServerIP }

// Listen opens port 547 on the interface and joins the DHCPv6 server
// groups; Serve does it when it was not called first (tests call it inside
// a network namespace).
func (s *Server6) Listen() error {
	if s.conn != nil {
		return nil
	}
	ifc, err := net.InterfaceByName(s.cfg.Interface)
	if err != nil {
		return fmt.Errorf("dhcp6: interface %s: %w", s.cfg.Interface, err)
	}
	conn, err := server6.NewIPv6UDPConn(s.cfg.Interface, &net.UDPAddr{IP: net.IPv6unspecified, Port: dhcpv6.DefaultServerPort})
	if err != nil {
		return fmt.Errorf("dhcp6: listen on %s port 547: %w", s.cfg.Interface, err)
	}
	p := ipv6.NewPacketConn(conn)
	for _, g := range []net.IP{dhcpv6.AllDHCPRelayAgentsAndServers, dhcpv6.AllDHCPServers} {
		if err := p.JoinGroup(ifc, &net.UDPAddr{IP: g, Port: dhcpv6.DefaultServerPort}); err != nil {
			conn.Close()
			return fmt.Errorf("dhcp6: join %s on %s: %w", g, s.cfg.Interface, err)
		}
	}
	s.conn = conn
	return nil
}

// Serve answers until ctx ends.
func (s *Server6) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	srv, err := server6.NewServer(s.cfg.Interface, nil, func(conn net.PacketConn, peer net.Addr, m dhcpv6.DHCPv6) {
		s.handle(conn, peer, m)
	}, server6.WithConn(s.conn))
	if err != nil {
		return fmt.Errorf("dhcp6: serve on %s: %w", s.cfg.Interface, err)
	}
	s.log.Info("DHCPv6 server answering", "server_ip", s.cfg.ServerIP, "prefix", s.cfg.Prefix)
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() { errc <- srv.Serve() })
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	srv.Close()
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("dhcp6: serve on %s: %w", s.cfg.Interface, err)
}

func (s *Server6) handle(conn net.PacketConn, peer net.Addr, d dhcpv6.DHCPv6) {
	m, ok := d.(*dhcpv6.Message)
	if !ok {
		return // relayed messages: Kiln answers on its own segment only
	}
	cid := m.Options.ClientID()
	if cid == nil {
		return
	}
	if !s.limit.allow(string(cid.ToBytes())) {
		s.log.Debug("DHCPv6 request over the rate limit", "type", m.Type())
		if s.cfg.Observe != nil {
			s.cfg.Observe(m, nil)
		}
		return
	}
	reply := Decide6(s.cfg.Config6, m)
	if s.cfg.Observe != nil {
		s.cfg.Observe(m, reply)
	}
	if reply == nil {
		return
	}
	c := Classify6(m)
	if _, err := conn.WriteTo(reply.ToBytes(), peer); err != nil {
		s.log.Warn("send DHCPv6 reply", "to", peer, "err", err)
		return
	}
	s.log.Info("DHCPv6 answer", "type", m.Type(), "reply", reply.Type(), "firmware", string(c.Firmware),
		"boot_file_url", reply.Options.BootFileURL(), "peer", peer)
}
