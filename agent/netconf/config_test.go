package netconf

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteResolvConf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etc", "resolv.conf")
	a := netip.MustParseAddr
	err := WriteResolvConf(path, []netip.Addr{a("192.0.2.53"), a("2001:db8::53"), a("192.0.2.53"), a("192.0.2.54"), a("192.0.2.55")},
		[]string{"lab.example.", "lab.example", " other.example "})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# written by kiln-agent\nnameserver 192.0.2.53\nnameserver 2001:db8::53\nnameserver 192.0.2.54\nsearch lab.example other.example\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestWaitReachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if err := WaitReachable(context.Background(), srv.URL+"/v1/", 5*time.Second); err != nil {
		t.Fatalf("reachable server: %v", err)
	}

	// A port nobody listens on: reserve one, then close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	err = WaitReachable(context.Background(), "http://"+addr, 1500*time.Millisecond)
	if err == nil {
		t.Fatal("closed port reported reachable")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("gave up after %v, timeout was 1.5s", el)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "not reachable") {
		t.Errorf("unclear error: %v", err)
	}
	for _, bad := range []string{"::nonsense", "ftp://host/x", ""} {
		if err := WaitReachable(context.Background(), bad, time.Second); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
