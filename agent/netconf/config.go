// Package netconf brings up the agent's network: links up, DHCPv4 (and
// best-effort DHCPv6) on the boot interface first, or a static address from
// the kernel's ip= argument, or a host's NMState network data (proto/nmstate:
// ethernet, bond and VLAN interfaces with static addresses, routes, DNS),
// which Apply realises with netlink.
//
// Everything acts on the calling process's network namespace.
package netconf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// Apply realises cfg: ethernet links up (with MTU), bonds created with their
// ports enslaved, VLANs created on their base, static addresses added,
// DHCP run where asked, routes and DNS written. It is idempotent: existing
// links of the right name are reused and addresses and routes replaced.
func Apply(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("apply network config: %w", err)
	}
	order := []InterfaceType{Ethernet, Bond, VLAN}
	for _, typ := range order {
		for _, ifc := range cfg.Interfaces {
			if ifc.Type != typ {
				continue
			}
			if err := applyLink(ifc); err != nil {
				return fmt.Errorf("apply %s %s: %w", ifc.Type, ifc.Name, err)
			}
		}
	}
	dns := cfg.DNS
	for _, ifc := range cfg.Interfaces {
		link, err := netlink.LinkByName(ifc.Name)
		if err != nil {
			return fmt.Errorf("look up %s: %w", ifc.Name, err)
		}
		for _, p := range append(append([]netip.Prefix{}, ifc.IPv4.Addresses...), ifc.IPv6.Addresses...) {
			if err := netlink.AddrReplace(link, &netlink.Addr{IPNet: ipNet(p)}); err != nil {
				return fmt.Errorf("add address %s to %s: %w", p, ifc.Name, err)
			}
		}
		for _, v6 := range []bool{false, true} {
			if (!v6 && !ifc.IPv4.DHCP) || (v6 && !ifc.IPv6.DHCP) {
				continue
			}
			get := DHCPv4
			if v6 {
				get = DHCPv6
			}
			lease, err := get(ctx, ifc.Name, 0)
			if err != nil {
				return fmt.Errorf("apply %s: %w", ifc.Name, err)
			}
			if err := ApplyLease(lease); err != nil {
				return err
			}
			dns.Servers = append(dns.Servers, lease.DNS...)
			dns.Search = append(dns.Search, lease.Search...)
		}
	}
	for _, r := range cfg.Routes {
		if err := addRoute(r); err != nil {
			return err
		}
	}
	if len(dns.Servers) > 0 {
		if err := WriteResolvConf(dns.ResolvConf, dns.Servers, dns.Search); err != nil {
			return err
		}
	}
	return nil
}

func applyLink(ifc Interface) error {
	if ifc.Type == Ethernet && ifc.MAC != nil {
		if err := nameByMAC(ifc.Name, ifc.MAC); err != nil {
			return err
		}
	}
	link, err := netlink.LinkByName(ifc.Name)
	var notFound netlink.LinkNotFoundError
	switch {
	case err == nil:
	case errors.As(err, &notFound) && ifc.Type != Ethernet:
		link, err = createLink(ifc)
		if err != nil {
			return err
		}
	case errors.As(err, &notFound):
		return fmt.Errorf("no link named %s here (%s); give the interface its mac-address to match it whatever the ramdisk calls it", ifc.Name, describeLinks())
	default:
		return fmt.Errorf("look up link: %w", err)
	}
	if ifc.Type == Bond {
		for _, p := range ifc.Bond.Ports {
			port, err := netlink.LinkByName(p)
			if err != nil {
				return fmt.Errorf("look up port %s: %w", p, err)
			}
			if port.Attrs().MasterIndex == link.Attrs().Index {
				continue
			}
			// The kernel only enslaves a port that is down.
			if err := netlink.LinkSetDown(port); err != nil {
				return fmt.Errorf("set port %s down: %w", p, err)
			}
			if err := netlink.LinkSetMasterByIndex(port, link.Attrs().Index); err != nil {
				return fmt.Errorf("enslave %s: %w", p, err)
			}
			if err := netlink.LinkSetUp(port); err != nil {
				return fmt.Errorf("set port %s up: %w", p, err)
			}
		}
	}
	if ifc.MTU > 0 && link.Attrs().MTU != ifc.MTU {
		if err := netlink.LinkSetMTU(link, ifc.MTU); err != nil {
			return fmt.Errorf("set MTU %d: %w", ifc.MTU, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	return nil
}

// macNamedLinks are the links a MAC can name: not bonds, VLANs or bridges,
// whose addresses are borrowed. Unlike PhysicalLinks it keeps bond ports
// (applying a document twice finds them enslaved) and veths (the tests'
// NICs).
func macNamedLinks() ([]netlink.Link, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []netlink.Link
	for _, l := range links {
		if t := l.Type(); (t == "device" || t == "veth") && len(l.Attrs().HardwareAddr) == 6 {
			out = append(out, l)
		}
	}
	return out, nil
}

// linkMAC is a link's own address: the permanent one when the kernel knows
// it (a bond port's current address is the bond's).
func linkMAC(l netlink.Link) net.HardwareAddr {
	if a := l.Attrs().PermHWAddr; len(a) == 6 {
		return a
	}
	return l.Attrs().HardwareAddr
}

// describeLinks lists the physical links for an error message.
func describeLinks() string {
	links, err := macNamedLinks()
	if err != nil {
		return err.Error()
	}
	if len(links) == 0 {
		return "no ethernet links at all"
	}
	var parts []string
	for _, l := range links {
		parts = append(parts, l.Attrs().Name+" "+linkMAC(l).String())
	}
	return "links: " + strings.Join(parts, ", ")
}

// nameByMAC renames the link that has mac to name, moving aside a link that
// already holds the name. Links are renamed down and left down; applyLink
// brings them up.
func nameByMAC(name string, mac net.HardwareAddr) error {
	links, err := macNamedLinks()
	if err != nil {
		return err
	}
	var match, holder netlink.Link
	for _, l := range links {
		if bytes.Equal(linkMAC(l), mac) {
			if match != nil {
				return fmt.Errorf("interface %s: links %s and %s both have MAC %s", name, match.Attrs().Name, l.Attrs().Name, mac)
			}
			match = l
		}
	}
	if match == nil {
		return fmt.Errorf("interface %s: no link has MAC %s (%s)", name, mac, describeLinks())
	}
	if match.Attrs().Name == name {
		return nil
	}
	if l, err := netlink.LinkByName(name); err == nil {
		holder = l
	}
	rename := func(l netlink.Link, to string) error {
		if err := netlink.LinkSetDown(l); err != nil {
			return fmt.Errorf("set %s down to rename it: %w", l.Attrs().Name, err)
		}
		if err := netlink.LinkSetName(l, to); err != nil {
			return fmt.Errorf("rename %s to %s: %w", l.Attrs().Name, to, err)
		}
		return nil
	}
	if holder != nil {
		if err := rename(holder, fmt.Sprintf("kiln%d", holder.Attrs().Index)); err != nil {
			return err
		}
	}
	if err := rename(match, name); err != nil {
		return err
	}
	slog.Info("link renamed to the network data's name", "from", match.Attrs().Name, "to", name, "mac", mac.String())
	return nil
}

func createLink(ifc Interface) (netlink.Link, error) {
	var link netlink.Link
	switch ifc.Type {
	case Bond:
		b := netlink.NewLinkBond(netlink.LinkAttrs{Name: ifc.Name})
		b.Mode = netlink.BOND_MODE_BALANCE_RR
		if ifc.Bond.Mode != "" {
			b.Mode = netlink.StringToBondMode(ifc.Bond.Mode)
		}
		if b.Mode == netlink.BOND_MODE_802_3AD || b.Mode == netlink.BOND_MODE_ACTIVE_BACKUP ||
			b.Mode == netlink.BOND_MODE_BALANCE_TLB || b.Mode == netlink.BOND_MODE_BALANCE_ALB {
			b.Miimon = 100
		}
		link = b
	case VLAN:
		base, err := netlink.LinkByName(ifc.VLAN.Base)
		if err != nil {
			return nil, fmt.Errorf("look up VLAN base %s: %w", ifc.VLAN.Base, err)
		}
		link = &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: ifc.Name, ParentIndex: base.Attrs().Index}, VlanId: ifc.VLAN.ID}
	}
	if err := netlink.LinkAdd(link); err != nil {
		return nil, fmt.Errorf("create link: %w", err)
	}
	return netlink.LinkByName(ifc.Name)
}

func addRoute(r Route) error {
	route := &netlink.Route{Priority: r.Metric}
	if r.Interface != "" {
		link, err := netlink.LinkByName(r.Interface)
		if err != nil {
			return fmt.Errorf("route %s: look up %s: %w", r.Destination, r.Interface, err)
		}
		route.LinkIndex = link.Attrs().Index
	}
	if r.Gateway.IsValid() {
		route.Gw = net.IP(r.Gateway.AsSlice())
	}
	if r.Destination.IsValid() && r.Destination.Bits() > 0 {
		route.Dst = ipNet(r.Destination.Masked())
	} else {
		// Default route: the family comes from the gateway (or destination).
		route.Family = netlink.FAMILY_V4
		if (r.Gateway.IsValid() && r.Gateway.Is6()) || (r.Destination.IsValid() && r.Destination.Addr().Is6()) {
			route.Family = netlink.FAMILY_V6
		}
	}
	if err := netlink.RouteReplace(route); err != nil {
		return fmt.Errorf("add route %s via %s dev %s: %w", r.Destination, r.Gateway, r.Interface, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// pollInterval is how often link state and reachability are rechecked.
const pollInterval = 200 * time.Millisecond
