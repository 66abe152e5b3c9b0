// Package nmstate is the network configuration a host carries before it can
// reach the controller: NMState's declarative format (YAML or JSON, as
// Metal3's networkData and preprovisioningNetworkData hold it), parsed into a
// small Config of ethernet, bond and VLAN interfaces, addresses, routes and
// DNS. The agent applies a Config (agent/netconf); the controller parses the
// same document to refuse a bad one before a host boots with it.
package nmstate

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// InterfaceType is the kind of an interface in a Config.
type InterfaceType string

// Interface types.
const (
	Ethernet InterfaceType = "ethernet"
	VLAN     InterfaceType = "vlan"
	Bond     InterfaceType = "bond"
)

// Config is a whole network configuration.
type Config struct {
	// Interfaces are applied in an order that satisfies dependencies:
	// ethernet, then bonds, then VLANs.
	Interfaces []Interface
	Routes     []Route
	DNS        DNS
}

// Interface is one interface to configure.
type Interface struct {
	Name string
	Type InterfaceType
	// MAC, when set on an ethernet interface, says which link is meant: a
	// ramdisk has no udev, so the kernel's eth0, eth1… are not the
	// predictable names (eno1, enp1s0) an operator writes. Apply renames
	// the link with this address to Name.
	MAC net.HardwareAddr
	// MatchByMAC: NMState's identifier: mac-address. Name is only the
	// profile's name; the installed system's keyfile matches the MAC alone.
	MatchByMAC bool
	// MTU is set when non-zero.
	MTU  int
	VLAN VLANConfig // for Type VLAN
	Bond BondConfig // for Type Bond
	IPv4 IPConfig
	IPv6 IPConfig
}

// VLANConfig names the parent link and the 802.1Q VLAN ID.
type VLANConfig struct {
	Base string
	ID   int
}

// BondModes are the kernel's bond mode names.
var BondModes = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}

// BondConfig lists a bond's mode (one of BondModes) and its ports.
type BondConfig struct {
	Mode  string
	Ports []string
}

// IPConfig is one address family's configuration of an interface.
type IPConfig struct {
	// DHCP asks for a lease (DHCPv4 or DHCPv6) after the static addresses.
	DHCP      bool
	Addresses []netip.Prefix
}

// Route is a static route; a zero Destination is the default route of the
// gateway's family.
type Route struct {
	Destination netip.Prefix
	Gateway     netip.Addr
	// Interface is required when there is no gateway (a link route).
	Interface string
	Metric    int
}

// DNS is the resolver configuration, written to ResolvConf when Servers is
// not empty.
type DNS struct {
	Servers []netip.Addr
	Search  []string
	// ResolvConf is the file to write; "" means /etc/resolv.conf.
	ResolvConf string
}

// Validate checks a Config for mistakes that would only surface half-way
// through Apply.
func (c Config) Validate() error {
	names := map[string]InterfaceType{}
	for _, i := range c.Interfaces {
		if i.Name == "" {
			return fmt.Errorf("interface without a name")
		}
		if _, dup := names[i.Name]; dup {
			return fmt.Errorf("interface %s listed twice", i.Name)
		}
		names[i.Name] = i.Type
		if i.MAC != nil && i.Type != Ethernet {
			return fmt.Errorf("interface %s: mac-address is only used to find ethernet links", i.Name)
		}
		if i.MatchByMAC && i.MAC == nil {
			return fmt.Errorf("interface %s: identifier mac-address without a mac-address", i.Name)
		}
	}
	for _, i := range c.Interfaces {
		switch i.Type {
		case Ethernet:
		case VLAN:
			if i.VLAN.Base == "" || i.VLAN.ID < 1 || i.VLAN.ID > 4094 {
				return fmt.Errorf("vlan %s: need a base interface and an ID in 1..4094, got %q/%d", i.Name, i.VLAN.Base, i.VLAN.ID)
			}
			if t, ok := names[i.VLAN.Base]; ok && t == VLAN {
				return fmt.Errorf("vlan %s: base %s is itself a VLAN", i.Name, i.VLAN.Base)
			}
		case Bond:
			if len(i.Bond.Ports) == 0 {
				return fmt.Errorf("bond %s: no ports", i.Name)
			}
			if i.Bond.Mode != "" && !slices.Contains(BondModes, i.Bond.Mode) {
				return fmt.Errorf("bond %s: unknown mode %q", i.Name, i.Bond.Mode)
			}
			for _, p := range i.Bond.Ports {
				if t, ok := names[p]; ok && t != Ethernet {
					return fmt.Errorf("bond %s: port %s is a %s, not ethernet", i.Name, p, t)
				}
			}
		default:
			return fmt.Errorf("interface %s: unknown type %q", i.Name, i.Type)
		}
		for _, p := range i.IPv4.Addresses {
			if !p.Addr().Is4() {
				return fmt.Errorf("interface %s: %s is not an IPv4 prefix", i.Name, p)
			}
		}
		for _, p := range i.IPv6.Addresses {
			if !p.Addr().Is6() || p.Addr().Is4In6() {
				return fmt.Errorf("interface %s: %s is not an IPv6 prefix", i.Name, p)
			}
		}
	}
	for _, r := range c.Routes {
		if !r.Gateway.IsValid() && r.Interface == "" {
			return fmt.Errorf("route %s: needs a gateway or an interface", r.Destination)
		}
		if r.Destination.IsValid() && r.Gateway.IsValid() && r.Destination.Addr().Is4() != r.Gateway.Is4() {
			return fmt.Errorf("route %s via %s: mixed address families", r.Destination, r.Gateway)
		}
	}
	return nil
}

// Parse reads a host's network configuration written in NMState's
// declarative format (YAML or JSON, as Metal3's networkData and
// preprovisioningNetworkData carry it) into a Config.
//
// Supported: interfaces of type ethernet, vlan (vlan.base-iface, vlan.id)
// and bond (link-aggregation.mode and port, or the older slaves); per
// interface mtu, state up, ipv4/ipv6 with enabled, dhcp, address lists of
// ip/prefix-length, and autoconf (IPv6: the kernel's SLAAC); routes.config
// entries with destination, next-hop-address, next-hop-interface, metric
// and the main table; dns-resolver.config server and search. An ethernet
// interface's mac-address picks the link (see Interface.MAC), and
// identifier: mac-address makes the installed system match it by MAC alone;
// on other types mac-address, and description everywhere, are accepted and
// not used.
//
// Everything else — other interface types, state absent or down, route
// rules, DHCP tuning, bond options other than miimon — is refused with an
// error naming the construct and where it is, rather than half-applied.
func Parse(b []byte) (Config, error) {
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return Config{}, fmt.Errorf("parse NMState: %w", err)
	}
	if doc == nil {
		return Config{}, fmt.Errorf("parse NMState: empty document")
	}
	p := &nmParser{}
	cfg := p.top(obj(p, "", doc))
	if p.err != nil {
		return Config{}, fmt.Errorf("parse NMState: %w", p.err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("parse NMState: %w", err)
	}
	return cfg, nil
}

// nmParser walks the decoded document keeping the first error.
type nmParser struct{ err error }

func (p *nmParser) fail(path, format string, args ...any) {
	if p.err == nil {
		if path != "" {
			format = path + ": " + format
		}
		p.err = fmt.Errorf(format, args...)
	}
}

// obj returns v as a mapping (nil and an error otherwise).
func obj(p *nmParser, path string, v any) map[string]any {
	if v == nil {
		return map[string]any{}
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(path, "want a mapping, got %s", yamlKind(v))
		return map[string]any{}
	}
	return m
}

// keys refuses the keys of m not in allowed, naming them.
func (p *nmParser) keys(path string, m map[string]any, allowed ...string) {
	var bad []string
	for k := range m {
		if !slices.Contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		where := path
		if where == "" {
			where = "top level"
		}
		p.fail("", "%s: %s not supported (supported: %s)", where, strings.Join(bad, ", "), strings.Join(allowed, ", "))
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (p *nmParser) str(path string, v any) string {
	switch s := v.(type) {
	case string:
		return s
	case int:
		return strconv.Itoa(s)
	case nil:
		return ""
	}
	p.fail(path, "want a string, got %s", yamlKind(v))
	return ""
}

func (p *nmParser) integer(path string, v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		if n == float64(int(n)) {
			return int(n)
		}
	case string:
		if i, err := strconv.Atoi(n); err == nil {
			return i
		}
	}
	p.fail(path, "want an integer, got %v", v)
	return 0
}

func (p *nmParser) boolean(path string, v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		if x, err := strconv.ParseBool(b); err == nil {
			return x
		}
	}
	p.fail(path, "want true or false, got %v", v)
	return false
}

func (p *nmParser) list(path string, v any) []any {
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		p.fail(path, "want a list, got %s", yamlKind(v))
	}
	return l
}

func (p *nmParser) top(m map[string]any) Config {
	var cfg Config
	p.keys("", m, "interfaces", "routes", "dns-resolver")
	for i, v := range p.list("interfaces", m["interfaces"]) {
		if ifc, ok := p.iface(fmt.Sprintf("interfaces[%d]", i), obj(p, fmt.Sprintf("interfaces[%d]", i), v)); ok {
			cfg.Interfaces = append(cfg.Interfaces, ifc)
		}
	}
	if r, ok := m["routes"]; ok {
		rm := obj(p, "routes", r)
		p.keys("routes", rm, "config")
		for i, v := range p.list("routes.config", rm["config"]) {
			path := fmt.Sprintf("routes.config[%d]", i)
			cfg.Routes = append(cfg.Routes, p.route(path, obj(p, path, v)))
		}
	}
	if d, ok := m["dns-resolver"]; ok {
		dm := obj(p, "dns-resolver", d)
		p.keys("dns-resolver", dm, "config")
		c := obj(p, "dns-resolver.config", dm["config"])
		p.keys("dns-resolver.config", c, "server", "search")
		for i, v := range p.list("dns-resolver.config.server", c["server"]) {
			path := fmt.Sprintf("dns-resolver.config.server[%d]", i)
			a, err := netip.ParseAddr(p.str(path, v))
			if err != nil {
				p.fail(path, "%v", err)
				continue
			}
			cfg.DNS.Servers = append(cfg.DNS.Servers, a)
		}
		for i, v := range p.list("dns-resolver.config.search", c["search"]) {
			cfg.DNS.Search = append(cfg.DNS.Search, p.str(fmt.Sprintf("dns-resolver.config.search[%d]", i), v))
		}
	}
	return cfg
}

func (p *nmParser) iface(path string, m map[string]any) (Interface, bool) {
	ifc := Interface{Name: p.str(join(path, "name"), m["name"])}
	if ifc.Name == "" {
		p.fail(path, "interface without a name")
		return ifc, false
	}
	path = fmt.Sprintf("interface %s", ifc.Name)
	p.keys(path, m, "name", "type", "state", "mtu", "mac-address", "identifier", "description",
		"ipv4", "ipv6", "vlan", "link-aggregation")
	switch st := p.str(join(path, "state"), m["state"]); st {
	case "", "up":
	default:
		p.fail(path, "state %q not supported (only up)", st)
	}
	switch t := p.str(join(path, "type"), m["type"]); t {
	case "ethernet":
		ifc.Type = Ethernet
	case "vlan":
		ifc.Type = VLAN
		v := obj(p, join(path, "vlan"), m["vlan"])
		p.keys(join(path, "vlan"), v, "base-iface", "id", "protocol")
		ifc.VLAN.Base = p.str(join(path, "vlan.base-iface"), v["base-iface"])
		ifc.VLAN.ID = p.integer(join(path, "vlan.id"), v["id"])
		if pr := p.str(join(path, "vlan.protocol"), v["protocol"]); pr != "" && pr != "802.1q" {
			p.fail(path, "vlan.protocol %q not supported (only 802.1q)", pr)
		}
	case "bond":
		ifc.Type = Bond
		la := obj(p, join(path, "link-aggregation"), m["link-aggregation"])
		p.keys(join(path, "link-aggregation"), la, "mode", "port", "slaves", "options")
		ifc.Bond.Mode = p.str(join(path, "link-aggregation.mode"), la["mode"])
		ports := la["port"]
		if ports == nil {
			ports = la["slaves"]
		}
		for i, v := range p.list(join(path, "link-aggregation.port"), ports) {
			ifc.Bond.Ports = append(ifc.Bond.Ports, p.str(fmt.Sprintf("%s.link-aggregation.port[%d]", path, i), v))
		}
		opts := obj(p, join(path, "link-aggregation.options"), la["options"])
		p.keys(join(path, "link-aggregation.options"), opts, "miimon")
	case "":
		p.fail(path, "no type")
	default:
		p.fail(path, "type %q not supported (ethernet, vlan, bond)", t)
	}
	if m["vlan"] != nil && ifc.Type != VLAN {
		p.fail(path, "vlan section on a %s interface", ifc.Type)
	}
	if m["link-aggregation"] != nil && ifc.Type != Bond {
		p.fail(path, "link-aggregation section on a %s interface", ifc.Type)
	}
	if v, ok := m["mtu"]; ok {
		ifc.MTU = p.integer(join(path, "mtu"), v)
	}
	if v, ok := m["mac-address"]; ok && ifc.Type == Ethernet {
		s := p.str(join(path, "mac-address"), v)
		if mac, err := net.ParseMAC(s); err != nil || len(mac) != 6 {
			p.fail(path, "mac-address %q is not an Ethernet MAC address", s)
		} else {
			ifc.MAC = mac
		}
	}
	switch id := p.str(join(path, "identifier"), m["identifier"]); id {
	case "", "name":
	case "mac-address":
		if ifc.Type != Ethernet || m["mac-address"] == nil {
			p.fail(path, "identifier mac-address needs an ethernet interface with a mac-address")
		}
		ifc.MatchByMAC = true
	default:
		p.fail(path, "identifier %q not supported (name, mac-address)", id)
	}
	ifc.IPv4 = p.ip(join(path, "ipv4"), m["ipv4"], false)
	ifc.IPv6 = p.ip(join(path, "ipv6"), m["ipv6"], true)
	return ifc, true
}

func (p *nmParser) ip(path string, v any, v6 bool) IPConfig {
	var c IPConfig
	if v == nil {
		return c
	}
	m := obj(p, path, v)
	allowed := []string{"enabled", "dhcp", "address", "auto-dns", "auto-routes", "auto-gateway"}
	if v6 {
		allowed = append(allowed, "autoconf")
	}
	p.keys(path, m, allowed...)
	enabled := true
	if e, ok := m["enabled"]; ok {
		enabled = p.boolean(join(path, "enabled"), e)
	}
	if d, ok := m["dhcp"]; ok {
		c.DHCP = p.boolean(join(path, "dhcp"), d)
	}
	for _, k := range []string{"auto-dns", "auto-routes", "auto-gateway"} {
		if a, ok := m[k]; ok && !p.boolean(join(path, k), a) {
			p.fail(path, "%s: false not supported (DHCP leases always bring their DNS servers and routes)", k)
		}
	}
	if a, ok := m["autoconf"]; ok {
		_ = p.boolean(join(path, "autoconf"), a) // SLAAC is the kernel's default either way
	}
	for i, a := range p.list(join(path, "address"), m["address"]) {
		ap := fmt.Sprintf("%s.address[%d]", path, i)
		am := obj(p, ap, a)
		p.keys(ap, am, "ip", "prefix-length")
		addr, err := netip.ParseAddr(p.str(join(ap, "ip"), am["ip"]))
		if err != nil {
			p.fail(ap, "%v", err)
			continue
		}
		plen := p.integer(join(ap, "prefix-length"), am["prefix-length"])
		pfx, err := addr.Prefix(plen)
		if err != nil || plen < 0 {
			p.fail(ap, "prefix-length %d does not fit %s", plen, addr)
			continue
		}
		c.Addresses = append(c.Addresses, netip.PrefixFrom(addr, pfx.Bits()))
	}
	if !enabled && (c.DHCP || len(c.Addresses) > 0) {
		p.fail(path, "enabled: false with addresses or dhcp")
	}
	return c
}

func (p *nmParser) route(path string, m map[string]any) Route {
	p.keys(path, m, "destination", "next-hop-address", "next-hop-interface", "metric", "table-id", "state")
	var r Route
	if st := p.str(join(path, "state"), m["state"]); st != "" {
		p.fail(path, "state %q not supported (routes can only be added)", st)
	}
	dst, err := netip.ParsePrefix(p.str(join(path, "destination"), m["destination"]))
	if err != nil {
		p.fail(path, "destination: %v", err)
	}
	r.Destination = dst
	if gw := p.str(join(path, "next-hop-address"), m["next-hop-address"]); gw != "" {
		if r.Gateway, err = netip.ParseAddr(gw); err != nil {
			p.fail(path, "next-hop-address: %v", err)
		}
	}
	r.Interface = p.str(join(path, "next-hop-interface"), m["next-hop-interface"])
	if v, ok := m["metric"]; ok {
		r.Metric = p.integer(join(path, "metric"), v)
	}
	if v, ok := m["table-id"]; ok {
		if t := p.integer(join(path, "table-id"), v); t != 0 && t != 254 {
			p.fail(path, "table-id %d not supported (only the main table, 254)", t)
		}
	}
	return r
}

func yamlKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case int, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%T", v)
}
