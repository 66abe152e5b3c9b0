package netconf

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Method says how an ip= argument wants an interface configured.
type Method string

// Configuration methods.
const (
	MethodOff    Method = "off"    // no configuration at all
	MethodDHCP   Method = "dhcp"   // DHCPv4 (kernel: dhcp, on, any, bootp, both)
	MethodDHCP6  Method = "dhcp6"  // DHCPv6 (dracut's extension)
	MethodStatic Method = "static" // the address in the argument
)

// IPArg is the kernel's ip= argument (Documentation/admin-guide/nfs/nfsroot.rst):
//
//	ip=<client-ip>:<server-ip>:<gw-ip>:<netmask>:<hostname>:<device>:<autoconf>:<dns0-ip>:<dns1-ip>:<ntp0-ip>
//
// or one word: ip=dhcp, ip=on, ip=off… IPv6 addresses may be written in
// brackets and the netmask as a prefix length, as dracut allows.
type IPArg struct {
	Method Method
	// Address is client-ip with its netmask; valid only for MethodStatic.
	Address  netip.Prefix
	Server   netip.Addr
	Gateway  netip.Addr
	Hostname string
	// Device is the interface to configure; "" means the boot interface or
	// the first with a link.
	Device string
	DNS    []netip.Addr
	NTP    netip.Addr
}

// ParseIPArg parses the value of the ip= kernel argument.
func ParseIPArg(s string) (IPArg, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return IPArg{}, fmt.Errorf("parse ip=: empty value")
	}
	if m, ok := autoconfMethod(s); ok && !strings.Contains(s, ":") {
		return IPArg{Method: m}, nil
	}
	f, err := splitFields(s)
	if err != nil {
		return IPArg{}, fmt.Errorf("parse ip=%s: %w", s, err)
	}
	for len(f) < 10 {
		f = append(f, "")
	}
	if len(f) > 10 {
		return IPArg{}, fmt.Errorf("parse ip=%s: %d fields, at most 10", s, len(f))
	}
	var a IPArg
	addr := func(i int, name string) (netip.Addr, error) {
		if f[i] == "" {
			return netip.Addr{}, nil
		}
		v, err := netip.ParseAddr(f[i])
		if err != nil {
			return v, fmt.Errorf("parse ip=%s: %s %q: %w", s, name, f[i], err)
		}
		return v.Unmap(), nil
	}
	client, err := addr(0, "client-ip")
	if err != nil {
		return a, err
	}
	if a.Server, err = addr(1, "server-ip"); err != nil {
		return a, err
	}
	if a.Gateway, err = addr(2, "gw-ip"); err != nil {
		return a, err
	}
	a.Hostname, a.Device = f[4], f[5]
	for i, name := range []string{"dns0-ip", "dns1-ip"} {
		d, err := addr(7+i, name)
		if err != nil {
			return a, err
		}
		if d.IsValid() {
			a.DNS = append(a.DNS, d)
		}
	}
	if a.NTP, err = addr(9, "ntp0-ip"); err != nil {
		return a, err
	}

	method, ok := autoconfMethod(f[6])
	if !ok {
		return a, fmt.Errorf("parse ip=%s: unknown autoconf %q", s, f[6])
	}
	switch {
	case client.IsValid() && (f[6] == "" || method == MethodOff):
		bits, err := maskBits(f[3], client)
		if err != nil {
			return a, fmt.Errorf("parse ip=%s: netmask %q: %w", s, f[3], err)
		}
		a.Method, a.Address = MethodStatic, netip.PrefixFrom(client, bits)
	case f[6] == "":
		// No client address and no autoconf: the kernel's default is "any".
		a.Method = MethodDHCP
	default:
		a.Method = method
	}
	if a.Method == MethodStatic && a.Gateway.IsValid() && a.Gateway.Is4() != client.Is4() {
		return a, fmt.Errorf("parse ip=%s: gateway %s and address %s are of different families", s, a.Gateway, client)
	}
	return a, nil
}

func autoconfMethod(s string) (Method, bool) {
	switch strings.ToLower(s) {
	case "off", "none":
		return MethodOff, true
	case "on", "any", "dhcp", "bootp", "both", "rarp", "":
		return MethodDHCP, true
	case "dhcp6", "auto6":
		return MethodDHCP6, true
	}
	return "", false
}

// splitFields splits on colons outside [brackets].
func splitFields(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '[':
			if depth > 0 {
				return nil, fmt.Errorf("nested '['")
			}
			depth++
		case r == ']':
			if depth == 0 {
				return nil, fmt.Errorf("unbalanced ']'")
			}
			depth--
		case r == ':' && depth == 0:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced '['")
	}
	return append(out, cur.String()), nil
}

// maskBits reads a dotted netmask or a prefix length; an empty IPv4 netmask
// is the address's classful default, as in the kernel, an empty IPv6 one /64.
func maskBits(mask string, client netip.Addr) (int, error) {
	if mask == "" {
		if client.Is6() {
			return 64, nil
		}
		switch b := client.As4()[0]; {
		case b < 128:
			return 8, nil
		case b < 192:
			return 16, nil
		default:
			return 24, nil
		}
	}
	if n, err := strconv.Atoi(mask); err == nil {
		if n < 0 || n > client.BitLen() {
			return 0, fmt.Errorf("prefix length %d out of range", n)
		}
		return n, nil
	}
	m, err := netip.ParseAddr(mask)
	if err != nil || !m.Is4() || !client.Is4() {
		return 0, fmt.Errorf("not an IPv4 netmask or prefix length")
	}
	v := uint32(0)
	for _, b := range m.As4() {
		v = v<<8 | uint32(b)
	}
	ones := 0
	for v&0x80000000 != 0 {
		ones++
		v <<= 1
	}
	if v != 0 {
		return 0, fmt.Errorf("non-contiguous netmask")
	}
	return ones, nil
}
