package netconf

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestParseIPArg(t *testing.T) {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		in      string
		want    IPArg
		wantErr bool
	}{
		{in: "dhcp", want: IPArg{Method: MethodDHCP}},
		{in: "on", want: IPArg{Method: MethodDHCP}},
		{in: "any", want: IPArg{Method: MethodDHCP}},
		{in: "bootp", want: IPArg{Method: MethodDHCP}},
		{in: "off", want: IPArg{Method: MethodOff}},
		{in: "none", want: IPArg{Method: MethodOff}},
		{in: "dhcp6", want: IPArg{Method: MethodDHCP6}},
		{in: "192.0.2.10:192.0.2.1:192.0.2.254:255.255.255.0:node1:eth0:off:192.0.2.53:192.0.2.54",
			want: IPArg{Method: MethodStatic, Address: p("192.0.2.10/24"), Server: a("192.0.2.1"), Gateway: a("192.0.2.254"),
				Hostname: "node1", Device: "eth0", DNS: []netip.Addr{a("192.0.2.53"), a("192.0.2.54")}}},
		{in: "10.1.2.3::10.1.2.1:255.255.0.0::enp1s0:none",
			want: IPArg{Method: MethodStatic, Address: p("10.1.2.3/16"), Gateway: a("10.1.2.1"), Device: "enp1s0"}},
		{in: "10.1.2.3::10.1.2.1:::eth1", // no netmask: classful /8, autoconf empty: static
			want: IPArg{Method: MethodStatic, Address: p("10.1.2.3/8"), Gateway: a("10.1.2.1"), Device: "eth1"}},
		{in: "192.0.2.7:::24", want: IPArg{Method: MethodStatic, Address: p("192.0.2.7/24")}},
		{in: ":::::eth0:dhcp", want: IPArg{Method: MethodDHCP, Device: "eth0"}},
		{in: ":::::eth0", want: IPArg{Method: MethodDHCP, Device: "eth0"}},
		{in: ":::::eth0:off", want: IPArg{Method: MethodOff, Device: "eth0"}},
		{in: "192.0.2.10::::::dhcp", want: IPArg{Method: MethodDHCP}}, // autoconf wins over the address
		{in: "[2001:db8::5]::[2001:db8::1]:64:h6:eth0:none:[2001:db8::53]",
			want: IPArg{Method: MethodStatic, Address: p("2001:db8::5/64"), Gateway: a("2001:db8::1"), Hostname: "h6",
				Device: "eth0", DNS: []netip.Addr{a("2001:db8::53")}}},
		{in: "192.0.2.10:::::::::192.0.2.123", want: IPArg{Method: MethodStatic, Address: p("192.0.2.10/24"), NTP: a("192.0.2.123")}},
		{in: "", wantErr: true},
		{in: "bogus", wantErr: true},
		{in: "192.0.2.300::::::off", wantErr: true},
		{in: "192.0.2.10:::255.0.255.0::eth0:off", wantErr: true}, // non-contiguous mask
		{in: "192.0.2.10:::33::eth0:off", wantErr: true},
		{in: "192.0.2.10::::::sometimes", wantErr: true},
		{in: "192.0.2.10::[2001:db8::1]:24::eth0:off", wantErr: true}, // mixed families
		{in: "[2001:db8::5::::", wantErr: true},
		{in: "1:2:3:4:5:6:7:8:9:10:11", wantErr: true},
	} {
		got, err := ParseIPArg(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseIPArg(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseIPArg(%q)\n got %+v\nwant %+v", tc.in, got, tc.want)
		}
	}
}

func FuzzParseIPArg(f *testing.F) {
	for _, s := range []string{"dhcp", "off", "192.0.2.10:192.0.2.1:192.0.2.254:255.255.255.0:node1:eth0:off:192.0.2.53:192.0.2.54",
		"[2001:db8::5]::[2001:db8::1]:64:h6:eth0:none", ":::::eth0:dhcp", "10.0.0.1:::0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseIPArg(s)
		if err != nil {
			return
		}
		switch a.Method {
		case MethodStatic:
			if !a.Address.IsValid() {
				t.Fatalf("static without an address: %+v", a)
			}
			if a.Gateway.IsValid() && a.Gateway.Is4() != a.Address.Addr().Is4() {
				t.Fatalf("mixed families accepted: %+v", a)
			}
		case MethodDHCP, MethodDHCP6, MethodOff:
			if a.Address.IsValid() {
				t.Fatalf("%s with an address: %+v", a.Method, a)
			}
		default:
			t.Fatalf("unknown method %q", a.Method)
		}
		if len(a.DNS) > 2 {
			t.Fatalf("more than two DNS servers: %+v", a)
		}
	})
}
