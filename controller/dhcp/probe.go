package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
)

// Answerer is a DHCP server that answered a probe.
type Answerer struct {
	Server netip.Addr // its server identifier
	// Proxy: it offered boot options but no address (a ProxyDHCP server).
	Proxy bool
	Offer string // the offer, summarised for the log
}

// Probe broadcasts a DHCPDISCOVER from a PXE client on iface and collects
// the servers that offer within wait: before a server starts, any other
// server on the segment that it would contradict.
func Probe(ctx context.Context, iface string, wait time.Duration) ([]Answerer, error) {
	c, err := nclient4.New(iface, nclient4.WithTimeout(wait), nclient4.WithRetry(1))
	if err != nil {
		return nil, fmt.Errorf("dhcp probe on %s: %w", iface, err)
	}
	defer c.Close()
	disc, err := dhcpv4.NewDiscovery(c.InterfaceAddr(),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(0)),
		dhcpv4.WithBroadcast(true))
	if err != nil {
		return nil, fmt.Errorf("dhcp probe on %s: %w", iface, err)
	}
	var mu sync.Mutex
	seen := map[netip.Addr]bool{}
	var out []Answerer
	collect := func(p *dhcpv4.DHCPv4) bool {
		if p.MessageType() != dhcpv4.MessageTypeOffer {
			return false
		}
		sid, _ := netip.AddrFromSlice(p.ServerIdentifier().To4())
		mu.Lock()
		defer mu.Unlock()
		if !seen[sid] {
			seen[sid] = true
			out = append(out, Answerer{Server: sid, Proxy: p.YourIPAddr == nil || p.YourIPAddr.IsUnspecified(), Offer: p.Summary()})
		}
		return false // keep listening until wait ends: there may be more
	}
	_, err = c.SendAndRead(ctx, &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ServerPort}, disc, collect)
	if err != nil && !errors.Is(err, nclient4.ErrNoResponse) && ctx.Err() == nil {
		return nil, fmt.Errorf("dhcp probe on %s: %w", iface, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return out, nil
}

// Conflicts are the answerers a server in mode would contradict: in full
// mode every other server, in proxy mode other proxies (the address server
// a proxy sits beside is expected).
func Conflicts(mode Mode, found []Answerer) []Answerer {
	var out []Answerer
	for _, a := range found {
		if mode == ModeFull || a.Proxy {
			out = append(out, a)
		}
	}
	return out
}
