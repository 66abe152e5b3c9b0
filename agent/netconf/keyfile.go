package netconf

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// KeyfileDir is where NetworkManager reads keyfiles, and where a CoreOS
// install (coreos-installer --copy-network, agent/coreos) copies them from.
const KeyfileDir = "/etc/NetworkManager/system-connections"

// Keyfiles renders cfg as NetworkManager keyfiles (file name → content), so
// the installed system's first boot configures the network the ramdisk
// had. Bond ports become port connections of their bond; static default
// routes become the interface's gateway, other routes routeN entries on the
// interface that reaches the gateway; DNS servers and search domains go on
// the first interface configured for the server's family.
func Keyfiles(cfg Config) (map[string][]byte, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("render keyfiles: %w", err)
	}
	portOf := map[string]string{}
	for _, i := range cfg.Interfaces {
		if i.Type == Bond {
			for _, p := range i.Bond.Ports {
				portOf[p] = i.Name
			}
		}
	}
	// Ports named only in a bond still get a connection.
	ifaces := append([]Interface(nil), cfg.Interfaces...)
	names := map[string]bool{}
	for _, i := range ifaces {
		names[i.Name] = true
	}
	var extra []string
	for p := range portOf {
		if !names[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(extra)
	for _, p := range extra {
		ifaces = append(ifaces, Interface{Name: p, Type: Ethernet})
	}

	type ipsec struct {
		gateway string
		metric  int
		routes  []string
		dns     []string
		search  []string
	}
	v4, v6 := map[string]*ipsec{}, map[string]*ipsec{}
	for _, i := range ifaces {
		v4[i.Name], v6[i.Name] = &ipsec{}, &ipsec{}
	}
	fam := func(a netip.Addr) map[string]*ipsec {
		if a.Is4() {
			return v4
		}
		return v6
	}
	configured := func(i Interface, six bool) bool {
		c := i.IPv4
		if six {
			c = i.IPv6
		}
		return portOf[i.Name] == "" && (c.DHCP || len(c.Addresses) > 0)
	}
	for _, r := range cfg.Routes {
		six := r.Gateway.Is6() || (!r.Gateway.IsValid() && r.Destination.Addr().Is6())
		dev := r.Interface
		if dev == "" {
			for _, i := range ifaces {
				addrs := i.IPv4.Addresses
				if six {
					addrs = i.IPv6.Addresses
				}
				for _, a := range addrs {
					if a.Masked().Contains(r.Gateway) {
						dev = i.Name
					}
				}
			}
		}
		s := fam(r.Gateway)[dev]
		if !r.Gateway.IsValid() {
			if six {
				s = v6[dev]
			} else {
				s = v4[dev]
			}
		}
		if s == nil {
			return nil, fmt.Errorf("render keyfiles: route %s via %s: no interface reaches the gateway", r.Destination, r.Gateway)
		}
		if r.Destination.Bits() == 0 && r.Gateway.IsValid() && s.gateway == "" {
			s.gateway, s.metric = r.Gateway.String(), r.Metric
			continue
		}
		e := r.Destination.Masked().String()
		if r.Gateway.IsValid() {
			e += "," + r.Gateway.String()
		} else if r.Metric != 0 {
			e += ","
			if six {
				e += "::"
			} else {
				e += "0.0.0.0"
			}
		}
		if r.Metric != 0 {
			e += fmt.Sprintf(",%d", r.Metric)
		}
		s.routes = append(s.routes, e)
	}
	var dnsHome *ipsec
	for _, srv := range cfg.DNS.Servers {
		var home *ipsec
		for _, i := range ifaces {
			if configured(i, srv.Is6()) {
				home = fam(srv)[i.Name]
				break
			}
		}
		if home == nil {
			return nil, fmt.Errorf("render keyfiles: DNS server %s: no interface has an address of its family", srv)
		}
		home.dns = append(home.dns, srv.String())
		if dnsHome == nil {
			dnsHome = home
		}
	}
	if len(cfg.DNS.Search) > 0 {
		if dnsHome == nil {
			return nil, fmt.Errorf("render keyfiles: DNS search domains without a DNS server")
		}
		dnsHome.search = cfg.DNS.Search
	}

	out := map[string][]byte{}
	for _, i := range ifaces {
		var b strings.Builder
		typ := map[InterfaceType]string{Ethernet: "ethernet", Bond: "bond", VLAN: "vlan"}[i.Type]
		fmt.Fprintf(&b, "[connection]\nid=%s\ntype=%s\n", i.Name, typ)
		if !i.MatchByMAC {
			fmt.Fprintf(&b, "interface-name=%s\n", i.Name)
		}
		b.WriteString("autoconnect=true\n")
		if bond := portOf[i.Name]; bond != "" {
			fmt.Fprintf(&b, "master=%s\nslave-type=bond\n", bond)
		}
		if i.MTU > 0 || i.Type == Ethernet {
			b.WriteString("\n[ethernet]\n")
			if i.MTU > 0 {
				fmt.Fprintf(&b, "mtu=%d\n", i.MTU)
			}
			if i.MAC != nil {
				fmt.Fprintf(&b, "mac-address=%s\n", strings.ToUpper(i.MAC.String()))
			}
		}
		switch i.Type {
		case Bond:
			mode := i.Bond.Mode
			if mode == "" {
				mode = "balance-rr"
			}
			fmt.Fprintf(&b, "\n[bond]\nmode=%s\nmiimon=100\n", mode)
		case VLAN:
			fmt.Fprintf(&b, "\n[vlan]\nflags=1\nid=%d\nparent=%s\n", i.VLAN.ID, i.VLAN.Base)
		}
		if portOf[i.Name] == "" {
			for _, six := range []bool{false, true} {
				c, s, sec := i.IPv4, v4[i.Name], "ipv4"
				if six {
					c, s, sec = i.IPv6, v6[i.Name], "ipv6"
				}
				fmt.Fprintf(&b, "\n[%s]\n", sec)
				// "auto" (DHCP, or SLAAC+DHCPv6) keeps addressN entries too.
				switch {
				case c.DHCP:
					b.WriteString("method=auto\n")
				case len(c.Addresses) > 0:
					b.WriteString("method=manual\n")
				default:
					// NMState's meaning of both "enabled: false" and no
					// section at all on a new interface.
					b.WriteString("method=disabled\n")
				}
				for n, a := range c.Addresses {
					fmt.Fprintf(&b, "address%d=%s\n", n+1, a)
				}
				if s.gateway != "" {
					fmt.Fprintf(&b, "gateway=%s\n", s.gateway)
					if s.metric != 0 {
						fmt.Fprintf(&b, "route-metric=%d\n", s.metric)
					}
				}
				for n, r := range s.routes {
					fmt.Fprintf(&b, "route%d=%s\n", n+1, r)
				}
				if len(s.dns) > 0 {
					fmt.Fprintf(&b, "dns=%s;\n", strings.Join(s.dns, ";"))
				}
				if len(s.search) > 0 {
					fmt.Fprintf(&b, "dns-search=%s;\n", strings.Join(s.search, ";"))
				}
			}
		}
		out[i.Name+".nmconnection"] = []byte(b.String())
	}
	return out, nil
}

// WriteKeyfiles writes Keyfiles(cfg) into dir ("" is KeyfileDir), mode
// 0600 as NetworkManager requires, each replaced atomically.
func WriteKeyfiles(dir string, cfg Config) error {
	if dir == "" {
		dir = KeyfileDir
	}
	files, err := Keyfiles(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write keyfiles: %w", err)
	}
	for name, b := range files {
		tmp, err := os.CreateTemp(dir, ".kiln-*")
		if err != nil {
			return fmt.Errorf("write keyfile %s: %w", name, err)
		}
		_, err = tmp.Write(b)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), 0o600)
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, name))
		}
		if err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write keyfile %s: %w", name, err)
		}
	}
	return nil
}
