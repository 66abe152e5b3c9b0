package netnstest

import (
	"io"
	"net/http"
	"testing"
)

// TestListenAndDialInside: a server of the test process listening inside
// the server namespace is reached through DialContext into it, and is not
// on the client namespace's loopback (that namespace has no listener).
func TestListenAndDialInside(t *testing.T) {
	seg := New(t, "10.77.0.1/24")
	ln := Listen(t, seg.SrvNS, "127.0.0.1:0")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "inside") })}
	go srv.Serve(ln) //nolint:errcheck // ends when the listener closes
	t.Cleanup(func() { srv.Close() })
	get := func(ns string) (string, error) {
		c := &http.Client{Transport: &http.Transport{DialContext: DialContext(ns)}}
		resp, err := c.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get(seg.SrvNS); err != nil || body != "inside" {
		t.Fatalf("GET in %s: %q, %v; want \"inside\"", seg.SrvNS, body, err)
	}
	if body, err := get(seg.CliNS); err == nil {
		t.Fatalf("GET in %s reached the other namespace's server: %q", seg.CliNS, body)
	}
}
