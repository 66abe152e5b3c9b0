package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/spf13/pflag"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/dhcp"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/controller/tftp"
)

// netbootOptions are the flags of the embedded DHCP and TFTP servers.
type netbootOptions struct {
	mode      string
	iface     string
	dhcpRange string
	routers   []string
	dns       []string
	leaseTime time.Duration
	rateBurst int
	probe     time.Duration
	tftp      bool
	ipxeDir   string
	ra        bool
	dhcp6     bool
}

func addNetbootFlags(f *pflag.FlagSet, o *netbootOptions) {
	f.StringVar(&o.mode, "dhcp", "off", "embedded DHCP server: off, proxy (boot options only, beside the site's DHCP server) or full (also leases --dhcp-range)")
	f.StringVar(&o.iface, "dhcp-interface", "", "the one interface DHCP and TFTP answer on (required with --dhcp)")
	f.StringVar(&o.dhcpRange, "dhcp-range", "", "addresses leased in full mode, FIRST-LAST (e.g. 10.0.0.100-10.0.0.200), in the interface's subnet")
	f.StringSliceVar(&o.routers, "dhcp-router", nil, "default gateway given to clients in full mode (repeatable)")
	f.StringSliceVar(&o.dns, "dhcp-dns", nil, "DNS servers given to clients in full mode (repeatable)")
	f.DurationVar(&o.leaseTime, "dhcp-lease-time", time.Hour, "lease duration in full mode")
	f.IntVar(&o.rateBurst, "dhcp-rate-burst", 20, "DHCP requests answered per MAC in a burst, then one a second (0: no limit)")
	f.DurationVar(&o.probe, "dhcp-probe", 5*time.Second, "how long to listen for other DHCP servers at start; servers that ping an address before offering it (dnsmasq, ISC dhcpd) take seconds (0: no probe)")
	f.BoolVar(&o.tftp, "tftp", true, "serve the iPXE binaries by TFTP on --dhcp-interface (on by default when --dhcp is on)")
	f.BoolVar(&o.ra, "ipv6-ra", true, "answer IPv6 router solicitations on --dhcp-interface with an advertisement that configures nothing, so that iPXE need not wait ~15 s for an IPv6 router (default: on with --dhcp full, off in proxy mode, where the site's routers answer)")
	f.BoolVar(&o.dhcp6, "dhcp6", true, "also answer DHCPv6 (boot file URL; addresses in the interface's /64 in full mode) when --dhcp-interface has a global or unique-local IPv6 address")
	f.StringVar(&o.ipxeDir, "ipxe-dir", tftp.DefaultDir, "directory of the iPXE binaries (undionly.kpxe, snponly.efi, ipxe.efi), served by TFTP and at /boot/ipxe/")
}

// netbootServers are the running DHCP and TFTP servers.
type netbootServers struct {
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// Stop ends the servers and waits for them.
func (n *netbootServers) Stop() {
	if n == nil {
		return
	}
	n.stop()
	n.wg.Wait()
}

// startNetboot starts DHCP and TFTP as the flags ask (nothing when --dhcp
// is off and --tftp was not set), after checking that no other server
// would contradict it, and serves the iPXE binaries at /boot/ipxe/.
func startNetboot(fs *pflag.FlagSet, o netbootOptions, apiURL, conductor string, st store.Store, a *api.Server, log *slog.Logger) (*netbootServers, error) {
	mode := dhcp.Mode(o.mode)
	switch o.mode {
	case "off", "proxy", "full":
	default:
		return nil, fmt.Errorf("--dhcp must be off, proxy or full, not %q", o.mode)
	}
	runTFTP := o.tftp && (o.mode != "off" || (fs != nil && fs.Changed("tftp")))
	if o.mode == "off" && !runTFTP {
		return nil, nil
	}
	if o.iface == "" {
		return nil, errors.New("--dhcp and --tftp need --dhcp-interface: Kiln answers only on an interface it is named")
	}
	ifc, err := net.InterfaceByName(o.iface)
	if err != nil {
		return nil, fmt.Errorf("--dhcp-interface %s: %w", o.iface, err)
	}
	pfx, err := dhcp.InterfaceIPv4(ifc)
	if err != nil {
		return nil, fmt.Errorf("--dhcp-interface: %w", err)
	}
	base, err := bootBaseURL(apiURL, pfx.Addr())
	if err != nil {
		return nil, err
	}
	h, err := tftp.HTTPHandler(o.ipxeDir)
	if err != nil {
		log.Warn("iPXE directory missing: /boot/ipxe/ answers 404 and TFTP is off; install Debian's ipxe package or set --ipxe-dir", "dir", o.ipxeDir, "err", err)
		h, runTFTP = http.NotFoundHandler(), false
	} else if missing := tftp.Missing(o.ipxeDir, firmwareFiles()); len(missing) > 0 {
		log.Warn("iPXE binaries missing: the firmware that needs them cannot network-boot; install Debian's ipxe package or set --ipxe-dir",
			"dir", o.ipxeDir, "missing", strings.Join(missing, ","), "needed_by", neededBy(missing))
	}
	wrapped := echo.WrapHandler(http.StripPrefix("/boot/ipxe", h))
	a.Echo().GET("/boot/ipxe/*", wrapped)
	a.Echo().HEAD("/boot/ipxe/*", wrapped)

	ctx, cancel := context.WithCancel(context.Background())
	n := &netbootServers{stop: cancel}
	fail := func(err error) (*netbootServers, error) {
		n.Stop()
		return nil, err
	}
	if mode == dhcp.ModeProxy || mode == dhcp.ModeFull {
		srv, err := newDHCPServer(o, mode, pfx, base, conductor, st, log)
		if err != nil {
			return fail(err)
		}
		if o.probe > 0 {
			if err := probeConflicts(o, mode, log); err != nil {
				return fail(err)
			}
		}
		if err := srv.Listen(); err != nil {
			return fail(err)
		}
		n.wg.Go(func() {
			if err := srv.Serve(ctx); err != nil {
				log.Error("DHCP server stopped", "err", err)
			}
		})
	}
	if o.dhcp6 && (mode == dhcp.ModeProxy || mode == dhcp.ModeFull) {
		srv6, err := newDHCPv6Server(o, mode, base, log)
		switch {
		case errors.Is(err, dhcp.ErrNoIPv6):
			log.Info("DHCPv6 off: the interface has no global or unique-local IPv6 address", "interface", o.iface)
		case err != nil:
			return fail(err)
		default:
			if err := srv6.Listen(); err != nil {
				return fail(err)
			}
			n.wg.Go(func() {
				if err := srv6.Serve(ctx); err != nil {
					log.Error("DHCPv6 server stopped", "err", err)
				}
			})
		}
	}
	if o.ra && (mode == dhcp.ModeFull || (fs != nil && fs.Changed("ipv6-ra"))) {
		ra := dhcp.NewAdvertiser(o.iface, log)
		n.wg.Go(func() {
			if err := ra.Serve(ctx); err != nil {
				log.Error("IPv6 router advertisements stopped", "err", err)
			}
		})
	}
	if runTFTP {
		t, err := tftp.New(tftp.Config{Dir: o.ipxeDir, Interface: o.iface, Listen: netip.AddrPortFrom(pfx.Addr(), 69), Log: log})
		if err != nil {
			return fail(err)
		}
		if err := t.Listen(); err != nil {
			return fail(err)
		}
		n.wg.Go(func() {
			if err := t.Serve(ctx); err != nil {
				log.Error("TFTP server stopped", "err", err)
			}
		})
	}
	return n, nil
}

func newDHCPServer(o netbootOptions, mode dhcp.Mode, pfx netip.Prefix, base, conductor string, st store.Store, log *slog.Logger) (*dhcp.Server, error) {
	cfg := dhcp.ServerConfig{
		Config: dhcp.Config{Mode: mode, ServerIP: pfx.Addr(), Netmask: net.CIDRMask(pfx.Bits(), 32), LeaseTime: o.leaseTime,
			ScriptURL: base + "/boot/boot.ipxe", HTTPBootURL: base + "/boot/ipxe/"},
		Interface: o.iface, Conductor: conductor, Log: log, RateBurst: o.rateBurst, Ports: st,
	}
	var err error
	if cfg.Routers, err = parseAddrs("--dhcp-router", o.routers); err != nil {
		return nil, err
	}
	if cfg.DNS, err = parseAddrs("--dhcp-dns", o.dns); err != nil {
		return nil, err
	}
	if mode == dhcp.ModeFull {
		if o.dhcpRange == "" {
			return nil, errors.New("--dhcp full needs --dhcp-range FIRST-LAST")
		}
		if cfg.First, cfg.Last, err = dhcp.ParseRange(o.dhcpRange); err != nil {
			return nil, fmt.Errorf("--dhcp-range: %w", err)
		}
		leases, ok := store.AsLeases(st)
		if !ok {
			return nil, errors.New("--dhcp full: this database has no lease table")
		}
		cfg.Leases = leases
	}
	return dhcp.NewServer(cfg)
}

// newDHCPv6Server answers DHCPv6 on the interface's IPv6 address; HTTP
// boot URLs then name the controller by that address, on the API's port.
func newDHCPv6Server(o netbootOptions, mode dhcp.Mode, base string, log *slog.Logger) (*dhcp.Server6, error) {
	ifc, err := net.InterfaceByName(o.iface)
	if err != nil {
		return nil, fmt.Errorf("--dhcp-interface %s: %w", o.iface, err)
	}
	ip6, err := dhcp.InterfaceIPv6(ifc)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if port := u.Port(); port != "" {
		u.Host = net.JoinHostPort(ip6.String(), port)
	} else {
		u.Host = "[" + ip6.String() + "]"
	}
	cfg := dhcp.Server6Config{
		Config6: dhcp.Config6{Mode: mode, ServerIP: ip6, LeaseTime: o.leaseTime,
			ScriptURL: base + "/boot/boot.ipxe", HTTPBootURL: u.String() + "/boot/ipxe/"},
		Interface: o.iface, Log: log, RateBurst: o.rateBurst,
	}
	dns, err := parseAddrs("--dhcp-dns", o.dns)
	if err != nil {
		return nil, err
	}
	for _, a := range dns {
		if a.Is6() && !a.Is4In6() {
			cfg.DNS = append(cfg.DNS, a)
		}
	}
	return dhcp.NewServer6(cfg)
}

// probeConflicts reports the DHCP servers already answering on the
// interface; in full mode another one is a conflict that stops the start.
func probeConflicts(o netbootOptions, mode dhcp.Mode, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.probe+5*time.Second)
	defer cancel()
	found, err := dhcp.Probe(ctx, o.iface, o.probe)
	if err != nil {
		log.Warn("could not probe for other DHCP servers", "interface", o.iface, "err", err)
		return nil
	}
	for _, a := range found {
		log.Info("DHCP server found on the segment", "interface", o.iface, "server", a.Server, "proxy", a.Proxy)
	}
	conflicts := dhcp.Conflicts(mode, found)
	if len(conflicts) == 0 {
		return nil
	}
	var names []string
	for _, a := range conflicts {
		kind := "address server"
		if a.Proxy {
			kind = "proxy"
		}
		names = append(names, fmt.Sprintf("%s (%s)", a.Server, kind))
	}
	if mode == dhcp.ModeProxy {
		log.Warn("another ProxyDHCP server answers on this segment: PXE clients may take its boot file instead of Kiln's",
			"interface", o.iface, "servers", strings.Join(names, ", "))
		return nil
	}
	return fmt.Errorf("--dhcp full on %s: another DHCP server answers there: %s; machines would get conflicting answers. "+
		"Stop it, run --dhcp proxy beside it, or start anyway with --dhcp-probe 0", o.iface, strings.Join(names, ", "))
}

// netbootAPIURL is the controller URL for agents and iPXE scripts when
// kiln serves network boot on an interface: an API URL on all addresses
// (--listen 0.0.0.0:… without --api-url gives http://[::]:…) names no
// host a machine can reach, so the interface's address takes its place.
// Anything else, errors included (startNetboot reports them), is kept.
func netbootAPIURL(fs *pflag.FlagSet, o netbootOptions, apiURL string) string {
	if o.iface == "" || (o.mode == "off" && !(o.tftp && fs != nil && fs.Changed("tftp"))) {
		return apiURL
	}
	ifc, err := net.InterfaceByName(o.iface)
	if err != nil {
		return apiURL
	}
	pfx, err := dhcp.InterfaceIPv4(ifc)
	if err != nil {
		return apiURL
	}
	if u, err := bootBaseURL(apiURL, pfx.Addr()); err == nil {
		return u
	}
	return apiURL
}

// bootBaseURL is the controller URL given to booting machines: --api-url,
// with an unspecified host (a --listen on all addresses) replaced by the
// DHCP interface's address. A loopback URL would send machines nowhere.
func bootBaseURL(apiURL string, ifaceIP netip.Addr) (string, error) {
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--api-url %q: want http(s)://host:port", apiURL)
	}
	host, port := u.Hostname(), u.Port()
	ip, err := netip.ParseAddr(host)
	switch {
	case err == nil && ip.IsUnspecified():
		if port == "" {
			u.Host = ifaceIP.String()
		} else {
			u.Host = net.JoinHostPort(ifaceIP.String(), port)
		}
	case (err == nil && ip.IsLoopback()) || host == "localhost":
		return "", fmt.Errorf("network boot needs a controller URL the machines reach, not %s: set --api-url http://%s:PORT or --listen on that address", apiURL, ifaceIP)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

func parseAddrs(flag string, ss []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range ss {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("%s %q: want an IPv4 address", flag, s)
		}
		out = append(out, a)
	}
	return out, nil
}

// firmwareFiles are the distinct x86-64 binaries the DHCP server names.
func firmwareFiles() []string {
	set := map[string]bool{}
	for fw, f := range dhcp.DefaultBootFiles {
		if fw != dhcp.FirmwareUEFIARM64 && fw != dhcp.FirmwareHTTPARM64 {
			set[f] = true
		}
	}
	var out []string
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// neededBy names the firmware that loads the missing files.
func neededBy(missing []string) string {
	var out []string
	for _, fw := range []dhcp.Firmware{dhcp.FirmwareBIOS, dhcp.FirmwareUEFI, dhcp.FirmwareHTTP} {
		for _, m := range missing {
			if dhcp.DefaultBootFiles[fw] == m {
				out = append(out, string(fw))
			}
		}
	}
	return strings.Join(out, ",")
}
