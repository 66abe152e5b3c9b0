package netconf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// BringupOptions configure Bringup from the kernel command line.
type BringupOptions struct {
	// BootIF is the MAC address of the boot interface (BOOTIF, either
	// "01-aa-bb-…" or "aa:bb:…"); it is tried first.
	BootIF string
	// IPArg is the value of the ip= kernel argument, "" when absent.
	IPArg string
	// Links restricts bring-up to these links; nil means PhysicalLinks().
	Links []string
	// CarrierTimeout bounds the wait for links to report carrier (default
	// 15 s); DHCPTimeout bounds each DHCPv4 exchange (default 30 s) and
	// DHCPv6Timeout the best-effort DHCPv6 one (default 5 s; negative skips
	// DHCPv6 unless ip=dhcp6 asks for it).
	CarrierTimeout time.Duration
	DHCPTimeout    time.Duration
	DHCPv6Timeout  time.Duration
	// DHCPv6Background: once DHCPv4 gave a lease, Bringup returns and the
	// best-effort DHCPv6 goes on in the background (default timeout then
	// 30 s), its lease applied when it comes; Result.DHCPv6Done says when it
	// ended. A network without DHCPv6 then costs the boot nothing, where
	// waiting costs every boot the whole timeout.
	DHCPv6Background bool
	// ResolvConf is the resolver file to write ("" is /etc/resolv.conf).
	ResolvConf string
	Logger     *slog.Logger
}

// Result says what Bringup configured.
type Result struct {
	// Links are the physical links set up.
	Links []string
	// Interface is the interface that got an address.
	Interface string
	// Leases are the DHCP leases applied (v4 first).
	Leases []Lease
	// Static is the ip= configuration applied instead of DHCP, if any.
	Static *IPArg
	// DHCPv6Done is closed when a background DHCPv6 attempt has ended (nil
	// when none was started).
	DHCPv6Done <-chan struct{} `json:"-"`
}

// Bringup configures the network of a freshly booted ramdisk: loopback and
// every physical link up; then either the static address of ip=, or DHCPv4 on
// the links with carrier, the BOOTIF link first, stopping at the first lease
// (so the machine has a single default route), followed by a bounded
// best-effort DHCPv6 on the same link. Without any DHCPv4 lease, DHCPv6 alone
// is tried. It fails when no link ends up with an address.
func Bringup(ctx context.Context, opts BringupOptions) (Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var (
		res Result
		ip  IPArg
		err error
	)
	if opts.IPArg != "" {
		if ip, err = ParseIPArg(opts.IPArg); err != nil {
			return res, err
		}
	}
	if lo, err := netlink.LinkByName("lo"); err == nil {
		if err := netlink.LinkSetUp(lo); err != nil {
			return res, fmt.Errorf("set lo up: %w", err)
		}
	}
	var links []netlink.Link
	if opts.Links == nil {
		if links, err = PhysicalLinks(); err != nil {
			return res, err
		}
	}
	for _, name := range opts.Links {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return res, fmt.Errorf("look up link %s: %w", name, err)
		}
		links = append(links, l)
	}
	for _, l := range links {
		if err := netlink.LinkSetUp(l); err != nil {
			return res, fmt.Errorf("set %s up: %w", l.Attrs().Name, err)
		}
		res.Links = append(res.Links, l.Attrs().Name)
	}
	if ip.Method == MethodOff {
		return res, nil
	}

	order := orderLinks(links, opts.BootIF, ip.Device)
	if ip.Method == MethodStatic {
		dev := ip.Device
		if dev == "" {
			withCarrier := waitCarrier(ctx, order, opts.CarrierTimeout)
			if len(withCarrier) == 0 {
				return res, fmt.Errorf("ip=%s: no device named and no link has carrier", opts.IPArg)
			}
			dev = withCarrier[0]
		}
		cfg := StaticConfig(ip, dev)
		cfg.DNS.ResolvConf = opts.ResolvConf
		if err := Apply(ctx, cfg); err != nil {
			return res, fmt.Errorf("apply ip=%s: %w", opts.IPArg, err)
		}
		res.Interface, res.Static = dev, &ip
		return res, nil
	}
	if ip.Device != "" {
		order = []string{ip.Device}
	}
	candidates := waitCarrier(ctx, order, opts.CarrierTimeout)
	if len(candidates) == 0 {
		return res, fmt.Errorf("no physical link has carrier after %s (links: %s)", orDefault(opts.CarrierTimeout, 15*time.Second), strings.Join(order, ", "))
	}
	var errs []error
	var dns []netip.Addr
	var search []string
	if ip.Method != MethodDHCP6 {
		for _, name := range candidates {
			lease, err := DHCPv4(ctx, name, opts.DHCPTimeout)
			if err == nil {
				err = ApplyLease(lease)
			}
			if err != nil {
				log.Warn("DHCPv4 failed", "interface", name, "err", err)
				errs = append(errs, err)
				continue
			}
			log.Info("DHCPv4 lease applied", "interface", name, "address", lease.Address, "gateway", lease.Gateway)
			res.Interface = name
			res.Leases = append(res.Leases, lease)
			dns, search = append(dns, lease.DNS...), append(search, lease.Search...)
			break
		}
	}
	v6on := candidates
	if res.Interface != "" {
		v6on = []string{res.Interface}
	}
	if opts.DHCPv6Timeout < 0 && ip.Method != MethodDHCP6 {
		v6on = nil
	}
	if opts.DHCPv6Background && res.Interface != "" && len(v6on) > 0 {
		if len(dns) > 0 {
			if err := WriteResolvConf(opts.ResolvConf, dns, search); err != nil {
				return res, err
			}
		}
		done := make(chan struct{})
		res.DHCPv6Done = done
		go func(name string, dns []netip.Addr, search []string) {
			defer close(done)
			lease, err := DHCPv6(ctx, name, orDefault(opts.DHCPv6Timeout, 30*time.Second))
			if err == nil {
				err = ApplyLease(lease)
			}
			if err != nil {
				log.Info("no DHCPv6 lease (best effort, in the background)", "interface", name, "err", err)
				return
			}
			log.Info("DHCPv6 lease applied", "interface", name, "address", lease.Address)
			if len(lease.DNS) > 0 {
				if err := WriteResolvConf(opts.ResolvConf, append(dns, lease.DNS...), append(search, lease.Search...)); err != nil {
					log.Warn("resolver file with the DHCPv6 servers", "err", err)
				}
			}
		}(v6on[0], slices.Clone(dns), slices.Clone(search))
		return res, nil
	}
	for _, name := range v6on {
		lease, err := DHCPv6(ctx, name, orDefault(opts.DHCPv6Timeout, 5*time.Second))
		if err == nil {
			err = ApplyLease(lease)
		}
		if err != nil {
			log.Info("no DHCPv6 lease (best effort)", "interface", name, "err", err)
			errs = append(errs, err)
			continue
		}
		log.Info("DHCPv6 lease applied", "interface", name, "address", lease.Address)
		res.Leases = append(res.Leases, lease)
		if res.Interface == "" {
			res.Interface = name
		}
		dns, search = append(dns, lease.DNS...), append(search, lease.Search...)
		break
	}
	if res.Interface == "" {
		return res, fmt.Errorf("no DHCP lease on %s: %w", strings.Join(candidates, ", "), errors.Join(errs...))
	}
	if len(dns) > 0 {
		if err := WriteResolvConf(opts.ResolvConf, dns, search); err != nil {
			return res, err
		}
	}
	return res, nil
}

// StaticConfig turns a static ip= argument into a Config for device dev.
func StaticConfig(ip IPArg, dev string) Config {
	ifc := Interface{Name: dev, Type: Ethernet}
	if ip.Address.Addr().Is4() {
		ifc.IPv4.Addresses = []netip.Prefix{ip.Address}
	} else {
		ifc.IPv6.Addresses = []netip.Prefix{ip.Address}
	}
	cfg := Config{Interfaces: []Interface{ifc}, DNS: DNS{Servers: ip.DNS}}
	if ip.Gateway.IsValid() {
		cfg.Routes = []Route{{Gateway: ip.Gateway, Interface: dev}}
	}
	return cfg
}

// PhysicalLinks lists the links backed by a device (/sys/class/net/X/device),
// which excludes loopback, bridges, bonds, VLANs, veth and tunnels, and
// links already enslaved to a bond.
func PhysicalLinks() ([]netlink.Link, error) {
	all, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []netlink.Link
	for _, l := range all {
		name := l.Attrs().Name
		_, err := os.Stat(filepath.Join("/sys/class/net", name, "device"))
		physical := err == nil && l.Type() == "device"
		if physical && l.Attrs().MasterIndex == 0 {
			out = append(out, l)
		}
	}
	return out, nil
}

// orderLinks returns link names with the boot interface (by MAC) or the named
// device first, the rest in kernel order.
func orderLinks(links []netlink.Link, bootIF, device string) []string {
	mac := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(bootIF)), "-", ":")
	if len(mac) == 20 && strings.HasPrefix(mac, "01:") {
		mac = mac[3:]
	}
	var first, rest []string
	for _, l := range links {
		name := l.Attrs().Name
		if (mac != "" && l.Attrs().HardwareAddr.String() == mac) || name == device {
			first = append(first, name)
		} else {
			rest = append(rest, name)
		}
	}
	return append(first, rest...)
}

// waitCarrier waits up to timeout (default 15 s) for any of names to have
// carrier, then returns those that do, in the given order.
func waitCarrier(ctx context.Context, names []string, timeout time.Duration) []string {
	ctx, cancel := context.WithTimeout(ctx, orDefault(timeout, 15*time.Second))
	defer cancel()
	for {
		var up []string
		for _, n := range names {
			if l, err := netlink.LinkByName(n); err == nil && l.Attrs().RawFlags&0x10000 != 0 /* IFF_LOWER_UP */ {
				up = append(up, n)
			}
		}
		if len(up) > 0 || ctx.Err() != nil {
			// Give slower links a moment to join when the first comes up.
			if len(up) > 0 && len(up) < len(names) && ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				up = up[:0]
				for _, n := range names {
					if l, err := netlink.LinkByName(n); err == nil && l.Attrs().RawFlags&0x10000 != 0 {
						up = append(up, n)
					}
				}
			}
			return slices.Clip(up)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollInterval):
		}
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
