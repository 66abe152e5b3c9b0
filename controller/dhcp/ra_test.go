package dhcp

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
)

// TestAdvertiserAnswersSolicitations solicits a router from the client end
// of a segment, as iPXE does, and checks the answer configures nothing.
func TestAdvertiserAnswersSolicitations(t *testing.T) {
	seg := newSegment(t, "10.77.0.1/24")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// Serve opens its socket itself: it runs whole on a thread in the
	// server's namespace.
	go func() {
		var err error
		inNS(t, seg.SrvNS, func() { err = NewAdvertiser(seg.SrvIf, slog.New(slog.DiscardHandler)).Serve(ctx) })
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	// The link-local address appears shortly after the link is up; the
	// deadline only stops a hang.
	deadline := time.Now().Add(30 * time.Second)
	var conn *ndp.Conn
	for {
		var err error
		inNS(t, seg.CliNS, func() {
			ifi, e := net.InterfaceByName(seg.CliIf)
			if e != nil {
				err = e
				return
			}
			conn, _, err = ndp.Listen(ifi, ndp.LinkLocal)
		})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer conn.Close()
	if err := conn.JoinGroup(netip.IPv6LinkLocalAllNodes()); err != nil {
		t.Fatal(err)
	}
	// Solicit until answered: the server may still be opening its socket.
	for {
		if err := conn.WriteTo(&ndp.RouterSolicitation{}, nil, netip.MustParseAddr("ff02::2")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		msg, _, from, err := conn.ReadFrom()
		if err == nil {
			ra, ok := msg.(*ndp.RouterAdvertisement)
			if !ok {
				continue
			}
			if ra.RouterLifetime != 0 || ra.ManagedConfiguration || ra.OtherConfiguration || !from.IsLinkLocalUnicast() {
				t.Fatalf("advertisement from %s: lifetime %s managed %v other %v; want one that configures nothing",
					from, ra.RouterLifetime, ra.ManagedConfiguration, ra.OtherConfiguration)
			}
			for _, o := range ra.Options {
				if _, isPrefix := o.(*ndp.PrefixInformation); isPrefix {
					t.Fatalf("advertisement carries a prefix: %v", o)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no router advertisement: %v", err)
		}
	}
}
