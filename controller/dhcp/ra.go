package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

// Advertiser answers IPv6 router solicitations on one interface with a
// router advertisement that configures nothing: router lifetime 0 (not a
// default router), no prefix, no DHCPv6. iPXE solicits a router each time
// it configures a NIC and, on a segment without IPv6 routers, waits about
// 15 seconds before it gives up and boots; this answer lets it go on at
// once. Hosts that already use IPv6 learn nothing from it.
type Advertiser struct {
	iface string
	log   *slog.Logger
}

// NewAdvertiser answers on iface.
func NewAdvertiser(iface string, log *slog.Logger) *Advertiser {
	if log == nil {
		log = slog.Default()
	}
	return &Advertiser{iface: iface, log: log.With("interface", iface)}
}

// allRouters is where router solicitations go (RFC 4861).
var allRouters = netip.MustParseAddr("ff02::2")

// Serve answers until ctx ends. The interface's link-local address may
// still be tentative (duplicate address detection) when kiln starts: it
// retries until it can listen.
func (a *Advertiser) Serve(ctx context.Context) error {
	var conn *ndp.Conn
	var ifi *net.Interface
	for warned := false; ; {
		var err error
		if conn, ifi, err = a.listen(); err == nil {
			break
		}
		if !warned {
			a.log.Warn("cannot answer IPv6 router solicitations yet; retrying", "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	a.log.Info("answering IPv6 router solicitations (router lifetime 0, nothing to configure)")
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	ra := &ndp.RouterAdvertisement{
		RouterLifetime: 0,
		Options:        []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: ifi.HardwareAddr}},
	}
	for {
		msg, _, from, err := conn.ReadFrom()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("read router solicitations on %s: %w", a.iface, err)
		}
		if _, ok := msg.(*ndp.RouterSolicitation); !ok {
			continue
		}
		// A solicitation from the unspecified address is answered to all
		// nodes, as RFC 4861 6.2.6 asks.
		dst := from
		if !from.IsLinkLocalUnicast() {
			dst = netip.IPv6LinkLocalAllNodes()
		}
		if err := conn.WriteTo(ra, nil, dst); err != nil {
			a.log.Warn("send router advertisement", "to", dst, "err", err)
			continue
		}
		a.log.Debug("router advertisement sent", "to", dst)
	}
}

func (a *Advertiser) listen() (*ndp.Conn, *net.Interface, error) {
	ifi, err := net.InterfaceByName(a.iface)
	if err != nil {
		return nil, nil, err
	}
	conn, _, err := ndp.Listen(ifi, ndp.LinkLocal)
	if err != nil {
		return nil, nil, err
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterSolicitation)
	if err := conn.SetICMPFilter(&f); err != nil {
		conn.Close()
		return nil, nil, err
	}
	if err := conn.JoinGroup(allRouters); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, ifi, nil
}
