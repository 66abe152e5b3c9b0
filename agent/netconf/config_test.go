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

func TestValidate(t *testing.T) {
	p := netip.MustParsePrefix
	good := Config{
		Interfaces: []Interface{
			{Name: "eth0", Type: Ethernet}, {Name: "eth1", Type: Ethernet},
			{Name: "bond0", Type: Bond, Bond: BondConfig{Mode: "active-backup", Ports: []string{"eth0", "eth1"}}},
			{Name: "bond0.100", Type: VLAN, VLAN: VLANConfig{Base: "bond0", ID: 100},
				IPv4: IPConfig{Addresses: []netip.Prefix{p("192.0.2.2/24")}}, IPv6: IPConfig{Addresses: []netip.Prefix{p("2001:db8::2/64")}}},
		},
		Routes: []Route{{Gateway: netip.MustParseAddr("192.0.2.1")}, {Destination: p("198.51.100.0/24"), Interface: "bond0.100"}},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"duplicate name":  func(c *Config) { c.Interfaces[1].Name = "eth0" },
		"no name":         func(c *Config) { c.Interfaces[0].Name = "" },
		"unknown type":    func(c *Config) { c.Interfaces[0].Type = "wifi" },
		"vlan id 0":       func(c *Config) { c.Interfaces[3].VLAN.ID = 0 },
		"vlan id 4095":    func(c *Config) { c.Interfaces[3].VLAN.ID = 4095 },
		"vlan no base":    func(c *Config) { c.Interfaces[3].VLAN.Base = "" },
		"bond no ports":   func(c *Config) { c.Interfaces[2].Bond.Ports = nil },
		"bond bad mode":   func(c *Config) { c.Interfaces[2].Bond.Mode = "fastest" },
		"bond vlan port":  func(c *Config) { c.Interfaces[2].Bond.Ports = []string{"bond0.100"} },
		"v6 in v4":        func(c *Config) { c.Interfaces[3].IPv4.Addresses = []netip.Prefix{p("2001:db8::9/64")} },
		"v4 in v6":        func(c *Config) { c.Interfaces[3].IPv6.Addresses = []netip.Prefix{p("192.0.2.9/24")} },
		"route no target": func(c *Config) { c.Routes[1].Interface = "" },
		"route mixed": func(c *Config) {
			c.Routes[0] = Route{Destination: p("2001:db8:1::/48"), Gateway: netip.MustParseAddr("192.0.2.1")}
		},
	} {
		c := good
		c.Interfaces = append([]Interface(nil), good.Interfaces...)
		c.Routes = append([]Route(nil), good.Routes...)
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

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
