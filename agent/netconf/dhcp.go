package netconf

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"github.com/vishvananda/netlink"
)

// Lease is the configuration a DHCP server handed out for one interface.
type Lease struct {
	Interface string
	// Address is the leased address with its prefix length (/128 for
	// DHCPv6, whose on-link prefix comes from router advertisements).
	Address  netip.Prefix
	Gateway  netip.Addr // DHCPv4 only; IPv6 routers announce themselves
	DNS      []netip.Addr
	Search   []string
	Hostname string
	Server   netip.Addr
	Duration time.Duration
}

// DefaultDHCPTimeout bounds one DHCP exchange when the caller gives none.
const DefaultDHCPTimeout = 30 * time.Second

// DHCPv4 runs a DHCPv4 exchange (DISCOVER/OFFER/REQUEST/ACK) on iface, which
// must be up, and returns the lease without applying it. timeout bounds the
// whole exchange (0: DefaultDHCPTimeout).
func DHCPv4(ctx context.Context, iface string, timeout time.Duration) (Lease, error) {
	if timeout <= 0 {
		timeout = DefaultDHCPTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := nclient4.New(iface, nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(int(timeout/(2*time.Second))+1))
	if err != nil {
		return Lease{}, fmt.Errorf("DHCPv4 on %s: open client: %w", iface, err)
	}
	defer c.Close()
	l, err := c.Request(ctx, dhcpv4.WithRequestedOptions(dhcpv4.OptionDNSDomainSearchList, dhcpv4.OptionHostName))
	if err != nil {
		return Lease{}, fmt.Errorf("DHCPv4 on %s: %w", iface, err)
	}
	return leaseFromACK(iface, l.ACK)
}

func leaseFromACK(iface string, ack *dhcpv4.DHCPv4) (Lease, error) {
	ip, ok := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if !ok || !ip.IsValid() || ip.IsUnspecified() {
		return Lease{}, fmt.Errorf("DHCPv4 on %s: ACK without an address", iface)
	}
	bits := 32
	if m := ack.SubnetMask(); m != nil {
		bits, _ = m.Size()
	} else {
		bits, _ = maskBits("", ip)
	}
	l := Lease{Interface: iface, Address: netip.PrefixFrom(ip, bits), Duration: ack.IPAddressLeaseTime(0), Hostname: ack.HostName()}
	if r := ack.Router(); len(r) > 0 {
		l.Gateway, _ = netip.AddrFromSlice(r[0].To4())
	}
	for _, d := range ack.DNS() {
		if a, ok := netip.AddrFromSlice(d.To4()); ok {
			l.DNS = append(l.DNS, a)
		}
	}
	if s := ack.DomainSearch(); s != nil {
		l.Search = append(l.Search, s.Labels...)
	} else if d := ack.DomainName(); d != "" {
		l.Search = []string{d}
	}
	if s := ack.ServerIdentifier(); s != nil {
		l.Server, _ = netip.AddrFromSlice(s.To4())
	}
	return l, nil
}

// DHCPv6 runs a DHCPv6 exchange (SOLICIT/ADVERTISE/REQUEST/REPLY) for one
// non-temporary address on iface. The interface needs its link-local
// address, so this waits (within timeout) for duplicate address detection.
func DHCPv6(ctx context.Context, iface string, timeout time.Duration) (Lease, error) {
	if timeout <= 0 {
		timeout = DefaultDHCPTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := waitLinkLocal(ctx, iface); err != nil {
		return Lease{}, fmt.Errorf("DHCPv6 on %s: %w", iface, err)
	}
	c, err := nclient6.New(iface, nclient6.WithTimeout(2*time.Second), nclient6.WithRetry(int(timeout/(2*time.Second))+1))
	if err != nil {
		return Lease{}, fmt.Errorf("DHCPv6 on %s: open client: %w", iface, err)
	}
	defer c.Close()
	adv, err := c.Solicit(ctx)
	if err != nil {
		return Lease{}, fmt.Errorf("DHCPv6 on %s: solicit: %w", iface, err)
	}
	reply, err := c.Request(ctx, adv)
	if err != nil {
		return Lease{}, fmt.Errorf("DHCPv6 on %s: request: %w", iface, err)
	}
	l := Lease{Interface: iface}
	if iana := reply.Options.OneIANA(); iana != nil {
		for _, a := range iana.Options.Addresses() {
			if ip, ok := netip.AddrFromSlice(a.IPv6Addr); ok {
				l.Address = netip.PrefixFrom(ip, 128)
				l.Duration = a.ValidLifetime
				break
			}
		}
	}
	if !l.Address.IsValid() {
		return Lease{}, fmt.Errorf("DHCPv6 on %s: reply without an IA_NA address", iface)
	}
	for _, d := range reply.Options.DNS() {
		if a, ok := netip.AddrFromSlice(d); ok {
			l.DNS = append(l.DNS, a)
		}
	}
	if s := reply.Options.DomainSearchList(); s != nil {
		l.Search = s.Labels
	}
	return l, nil
}

// waitLinkLocal waits until iface has a non-tentative link-local address.
func waitLinkLocal(ctx context.Context, iface string) error {
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("look up link: %w", err)
	}
	for {
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			return fmt.Errorf("list addresses: %w", err)
		}
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() && a.Flags&0x40 == 0 /* IFA_F_TENTATIVE */ {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no usable link-local IPv6 address: %w", ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// ApplyLease adds the lease's address to its interface and, for DHCPv4, a
// default route through its gateway. DNS is left to the caller (see
// WriteResolvConf), which may merge several leases.
func ApplyLease(l Lease) error {
	link, err := netlink.LinkByName(l.Interface)
	if err != nil {
		return fmt.Errorf("apply lease on %s: %w", l.Interface, err)
	}
	addr := &netlink.Addr{IPNet: ipNet(l.Address)}
	if l.Duration > 0 {
		// Let the kernel expire the address if the agent cannot renew it.
		secs := int(l.Duration / time.Second)
		addr.ValidLft, addr.PreferedLft = secs, secs
	}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("apply lease: add %s to %s: %w", l.Address, l.Interface, err)
	}
	if l.Gateway.IsValid() {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.IP(l.Gateway.AsSlice()), Family: netlink.FAMILY_V4}
		if !l.Address.Contains(l.Gateway) {
			// A gateway outside the leased subnet needs a link route first.
			if err := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(netip.PrefixFrom(l.Gateway, 32)), Scope: netlink.SCOPE_LINK}); err != nil {
				return fmt.Errorf("apply lease: route to gateway %s: %w", l.Gateway, err)
			}
		}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("apply lease: default route via %s dev %s: %w", l.Gateway, l.Interface, err)
		}
	}
	return nil
}
