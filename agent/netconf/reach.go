package netconf

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"
)

// WaitReachable waits until a TCP connection to the host and port of apiURL
// succeeds, retrying until timeout. It proves the network is usable for the
// agent's lookup before the first HTTP request, and names the address it
// tried and the last error when it gives up.
func WaitReachable(ctx context.Context, apiURL string, timeout time.Duration) error {
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("wait for API: bad URL %q", apiURL)
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		default:
			return fmt.Errorf("wait for API: URL %q has no port and scheme %q has no default", apiURL, u.Scheme)
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	var last error
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := d.DialContext(actx, "tcp", addr)
		acancel()
		if err == nil {
			conn.Close()
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("API %s (%s) not reachable over TCP after %d attempts in %s; check the network configuration and that the controller listens there: %w",
				apiURL, addr, attempt, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
