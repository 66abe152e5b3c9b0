package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// PortLookup finds an enrolled port by MAC: a MAC Kiln knows gets a static
// lease in full mode. store.Store has it.
type PortLookup interface {
	GetPortByAddress(ctx context.Context, mac string) (*proto.Port, error)
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Config
	// Interface is the only interface answered on: the sockets are bound
	// to it (SO_BINDTODEVICE), so requests arriving elsewhere never reach
	// the server.
	Interface string
	// First and Last bound the addresses leased in full mode.
	First, Last netip.Addr
	Leases      store.Leases
	Ports       PortLookup // optional
	Conductor   string
	Log         *slog.Logger
	// RateBurst answers per MAC, then one per RateInterval; 0 disables.
	RateBurst    int
	RateInterval time.Duration
	Now          func() time.Time
	// Observe, if set, sees every request handled and the reply sent
	// (nil when none): for metrics and tests.
	Observe func(Request, *dhcpv4.DHCPv4)
}

// Server answers DHCP on one interface.
type Server struct {
	cfg   ServerConfig
	log   *slog.Logger
	limit *rateLimiter
	conns []portConn
}

// NewServer checks cfg and, when ServerIP is unset, takes the interface's
// first IPv4 address (and its netmask, if none is set).
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Interface == "" {
		return nil, errors.New("dhcp: no interface named (--dhcp-interface): Kiln answers DHCP only on an interface it is told")
	}
	if cfg.Mode != ModeProxy && cfg.Mode != ModeFull {
		return nil, fmt.Errorf("dhcp: mode %q: want proxy or full", cfg.Mode)
	}
	ifc, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("dhcp: interface %s: %w", cfg.Interface, err)
	}
	if !cfg.ServerIP.IsValid() {
		pfx, err := InterfaceIPv4(ifc)
		if err != nil {
			return nil, err
		}
		cfg.ServerIP = pfx.Addr()
		if cfg.Netmask == nil {
			cfg.Netmask = net.CIDRMask(pfx.Bits(), 32)
		}
	}
	if cfg.LeaseTime <= 0 {
		cfg.LeaseTime = time.Hour
	}
	if cfg.Mode == ModeFull {
		if cfg.Leases == nil {
			return nil, errors.New("dhcp: full mode needs a lease table")
		}
		if !cfg.First.Is4() || !cfg.Last.Is4() || cfg.Last.Less(cfg.First) {
			return nil, fmt.Errorf("dhcp: range %s-%s: want two IPv4 addresses, lowest first (--dhcp-range A-B)", cfg.First, cfg.Last)
		}
		if cfg.Netmask != nil {
			ones, _ := cfg.Netmask.Size()
			subnet := netip.PrefixFrom(cfg.ServerIP, ones).Masked()
			if !subnet.Contains(cfg.First) || !subnet.Contains(cfg.Last) {
				return nil, fmt.Errorf("dhcp: range %s-%s is not in %s, the subnet of %s", cfg.First, cfg.Last, subnet, cfg.Interface)
			}
		}
	}
	if cfg.RateInterval <= 0 {
		cfg.RateInterval = time.Second
	}
	return &Server{cfg: cfg, log: cfg.Log.With("interface", cfg.Interface, "dhcp", string(cfg.Mode)),
		limit: newRateLimiter(cfg.RateBurst, cfg.RateInterval, cfg.Now)}, nil
}

// InterfaceIPv4 is the first IPv4 address of ifc, with its prefix length.
func InterfaceIPv4(ifc *net.Interface) (netip.Prefix, error) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("dhcp: addresses of %s: %w", ifc.Name, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			ip, _ := netip.AddrFromSlice(n.IP.To4())
			ones, _ := n.Mask.Size()
			return netip.PrefixFrom(ip, ones), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("dhcp: interface %s has no IPv4 address", ifc.Name)
}

// ServerIP is the address the server answers as.
func (s *Server) ServerIP() netip.Addr { return s.cfg.ServerIP }

// Listen opens the sockets: port 67, and in proxy mode also 4011, bound to
// the interface. Serve calls it if the caller has not; tests call it
// inside a network namespace.
func (s *Server) Listen() error {
	if s.conns != nil {
		return nil
	}
	ports := []int{dhcpv4.ServerPort}
	if s.cfg.Mode == ModeProxy {
		ports = append(ports, PXEPort)
	}
	for _, port := range ports {
		conn, err := server4.NewIPv4UDPConn(s.cfg.Interface, &net.UDPAddr{Port: port})
		if err != nil {
			for _, c := range s.conns {
				c.conn.Close()
			}
			s.conns = nil
			return fmt.Errorf("dhcp: listen on %s port %d: %w", s.cfg.Interface, port, err)
		}
		s.conns = append(s.conns, portConn{port: port, conn: conn})
	}
	return nil
}

type portConn struct {
	port int
	conn net.PacketConn
}

// Serve answers until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	var servers []*server4.Server
	var ports []int
	for _, pc := range s.conns {
		srv, err := server4.NewServer(s.cfg.Interface, nil,
			func(conn net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4) { s.handle(ctx, conn, peer, m, pc.port) },
			server4.WithConn(pc.conn))
		if err != nil {
			return fmt.Errorf("dhcp: serve on %s port %d: %w", s.cfg.Interface, pc.port, err)
		}
		servers = append(servers, srv)
		ports = append(ports, pc.port)
	}
	s.log.Info("DHCP server answering", "server_ip", s.cfg.ServerIP, "ports", ports, "range", s.rangeString())
	var wg sync.WaitGroup
	errc := make(chan error, len(servers))
	for _, srv := range servers {
		wg.Go(func() { errc <- srv.Serve() })
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	for _, srv := range servers {
		srv.Close()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("dhcp: serve on %s: %w", s.cfg.Interface, err)
}

func (s *Server) rangeString() string {
	if s.cfg.Mode != ModeFull {
		return "none (proxy)"
	}
	return s.cfg.First.String() + "-" + s.cfg.Last.String()
}

// handle answers one message; server4 runs it in its own goroutine.
func (s *Server) handle(ctx context.Context, conn net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4, port int) {
	mac := m.ClientHWAddr.String()
	log := s.log.With("mac", mac, "type", m.MessageType().String())
	if m.OpCode != dhcpv4.OpcodeBootRequest {
		return
	}
	if !m.GatewayIPAddr.IsUnspecified() && m.GatewayIPAddr != nil {
		log.Debug("relayed DHCP request ignored: relays are not supported", "giaddr", m.GatewayIPAddr)
		return
	}
	if !s.limit.allow(mac) {
		log.Warn("DHCP request dropped: rate limit for this MAC")
		s.observe(Request{Msg: m, Port: port}, nil)
		return
	}
	if s.cfg.Mode == ModeFull && port == dhcpv4.ServerPort && m.MessageType() == dhcpv4.MessageTypeRelease && forUs(s.cfg.Config, m) {
		if err := s.cfg.Leases.ReleaseLease(ctx, mac); err != nil {
			log.Error("release DHCP lease", "err", err)
		}
		s.observe(Request{Msg: m, Port: port}, nil)
		return
	}
	req := Request{Msg: m, Port: port}
	if NeedsLease(s.cfg.Config, m, port) {
		lease, err := s.lease(ctx, mac)
		if err != nil {
			log.Error("no DHCP lease", "err", err)
		} else {
			req.Lease = lease
		}
	}
	reply := Decide(s.cfg.Config, req)
	defer s.observe(req, reply)
	if reply == nil {
		log.Debug("DHCP request not answered", "firmware", string(Classify(m).Firmware), "port", port)
		return
	}
	dst := s.destination(peer, m, reply, port)
	if _, err := conn.WriteTo(reply.ToBytes(), dst); err != nil {
		log.Error("send DHCP reply", "to", dst.String(), "err", err)
		return
	}
	if reply.BootFileName != "" {
		log.Info("DHCP boot answer", "reply", reply.MessageType().String(), "firmware", string(Classify(m).Firmware),
			"boot_file", reply.BootFileName, "ip", reply.YourIPAddr.String())
	} else {
		log.Debug("DHCP answer", "reply", reply.MessageType().String(), "ip", reply.YourIPAddr.String())
	}
}

func (s *Server) observe(r Request, reply *dhcpv4.DHCPv4) {
	if s.cfg.Observe != nil {
		s.cfg.Observe(r, reply)
	}
}

// lease acquires mac's address; a MAC of an enrolled port gets a static one.
func (s *Server) lease(ctx context.Context, mac string) (netip.Addr, error) {
	static := false
	if s.cfg.Ports != nil {
		if _, err := s.cfg.Ports.GetPortByAddress(ctx, mac); err == nil {
			static = true
		} else if !errors.Is(err, store.ErrNotFound) {
			return netip.Addr{}, fmt.Errorf("look up port %s: %w", mac, err)
		}
	}
	exclude := append([]netip.Addr{s.cfg.ServerIP}, s.cfg.Routers...)
	exclude = append(exclude, s.cfg.DNS...)
	l, err := s.cfg.Leases.AcquireLease(ctx, store.LeaseRequest{MAC: mac, First: s.cfg.First, Last: s.cfg.Last,
		Exclude: exclude, TTL: s.cfg.LeaseTime, Static: static, Conductor: s.cfg.Conductor})
	if err != nil {
		return netip.Addr{}, err
	}
	return l.IP, nil
}

// destination is where a reply goes: back to the sender of a PXE boot
// server request (4011) or of a renewal from a configured address, else
// broadcast on the interface, since a client without an address cannot
// receive unicast before it has one.
func (s *Server) destination(peer net.Addr, m, reply *dhcpv4.DHCPv4, port int) *net.UDPAddr {
	client := &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
	up, _ := peer.(*net.UDPAddr)
	if up == nil {
		return client
	}
	if port == PXEPort {
		return up
	}
	if reply.MessageType() != dhcpv4.MessageTypeNak && !m.ClientIPAddr.IsUnspecified() && m.ClientIPAddr != nil &&
		!up.IP.Equal(net.IPv4bcast) {
		return &net.UDPAddr{IP: m.ClientIPAddr, Port: up.Port}
	}
	return client
}

// ParseRange parses --dhcp-range "A-B".
func ParseRange(s string) (netip.Addr, netip.Addr, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("DHCP range %q: want FIRST-LAST, e.g. 10.0.0.100-10.0.0.200", s)
	}
	first, err1 := netip.ParseAddr(strings.TrimSpace(a))
	last, err2 := netip.ParseAddr(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || !first.Is4() || !last.Is4() || last.Less(first) {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("DHCP range %q: want two IPv4 addresses, lowest first", s)
	}
	return first, last, nil
}
