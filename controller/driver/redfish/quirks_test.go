package redfish

import (
	"slices"
	"strings"
	"testing"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/kilnhq/kiln/proto"
)

func TestQuirksFor(t *testing.T) {
	names := func(v Vendor) []string {
		var n []string
		for _, q := range QuirksFor(v) {
			n = append(n, q.Name)
		}
		return n
	}
	for _, c := range []struct {
		v    Vendor
		want []string
	}{
		{Vendor{Vendor: "Dell", Product: "Integrated Dell Remote Access Controller"}, []string{"idrac-enabled-with-target"}},
		{Vendor{Vendor: "HPE", Manufacturer: "HPE"}, []string{"ilo-boot-mode-read-only"}},
		{Vendor{Manufacturer: "Supermicro", Model: "SYS-120U-TNR"}, []string{"supermicro-repeat-boot-mode", "supermicro-insert-image-only"}},
		{Vendor{Vendor: "AMI", Manufacturer: "American Megatrends International"}, []string{"supermicro-repeat-boot-mode", "supermicro-insert-image-only"}},
		{Vendor{Vendor: "Kiln", Manufacturer: "Kiln Simulated"}, nil},
		{Vendor{Vendor: "Lenovo", Manufacturer: "Lenovo"}, nil},
		{Vendor{Vendor: "Miami Systems", Product: "Shiloh"}, nil}, // words, not substrings
		{Vendor{Vendor: "HPE", Product: "iLO 6"}, []string{"ilo-boot-mode-read-only"}},
	} {
		if got := names(c.v); !slices.Equal(got, c.want) {
			t.Errorf("%+v: quirks %v, want %v", c.v, got, c.want)
		}
	}
}

func TestIdracEnabledWithTarget(t *testing.T) {
	cur := schemas.Boot{BootSourceOverrideEnabled: "Once", BootSourceOverrideTarget: "Pxe"}
	p := BootPatch{Target: "Cd"}
	idracEnabledWithTarget(&p, cur)
	if p != (BootPatch{Enabled: "Once", Target: "Cd"}) {
		t.Errorf("target only: %+v", p)
	}
	p = BootPatch{Mode: "UEFI"}
	idracEnabledWithTarget(&p, cur)
	if p != (BootPatch{Mode: "UEFI"}) {
		t.Errorf("mode only must stay mode only: %+v", p)
	}
	p = BootPatch{Enabled: "Continuous", Target: "Hdd"}
	idracEnabledWithTarget(&p, cur)
	if p.Enabled != "Continuous" {
		t.Errorf("explicit Enabled overwritten: %+v", p)
	}
}

func TestIloDropBootMode(t *testing.T) {
	p := BootPatch{Enabled: "Once", Target: "Pxe", Mode: "UEFI"}
	iloDropBootMode(&p, schemas.Boot{})
	if p != (BootPatch{Enabled: "Once", Target: "Pxe"}) {
		t.Errorf("%+v", p)
	}
}

func TestSupermicroRepeatBootMode(t *testing.T) {
	cur := schemas.Boot{BootSourceOverrideMode: "UEFI"}
	p := BootPatch{Target: "Pxe"}
	supermicroRepeatBootMode(&p, cur)
	if p.Mode != "UEFI" {
		t.Errorf("mode not repeated: %+v", p)
	}
	p = BootPatch{Target: "Pxe", Mode: "Legacy"}
	supermicroRepeatBootMode(&p, cur)
	if p.Mode != "Legacy" {
		t.Errorf("requested mode replaced: %+v", p)
	}
}

func TestInsertImageOnly(t *testing.T) {
	yes := true
	p := &schemas.VirtualMediaInsertMediaParameters{Image: "http://x/a.iso", Inserted: &yes, WriteProtected: &yes}
	insertImageOnly(p)
	if p.Image != "http://x/a.iso" || p.Inserted != nil || p.WriteProtected != nil {
		t.Errorf("%+v", p)
	}
}

func TestRedfishMessage(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"error":{"code":"Base.1.8.GeneralError","message":"A general error","@Message.ExtendedInfo":[{"MessageId":"IDRAC.2.8.SYS444","Message":"depends"}]}}`,
			"Base.1.8.GeneralError A general error; IDRAC.2.8.SYS444: depends"},
		{``, "(empty body)"},
		{`<html>Bad Gateway</html>`, "<html>Bad Gateway</html>"},
	} {
		if got := redfishMessage([]byte(c.body)); got != c.want {
			t.Errorf("%q → %q, want %q", c.body, got, c.want)
		}
	}
}

func FuzzRedfishMessage(f *testing.F) {
	f.Add([]byte(`{"error":{"code":"x","@Message.ExtendedInfo":[{"MessageId":"a","Message":"b"}]}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if redfishMessage(b) == "" {
			t.Fatal("empty message")
		}
	})
}

// FuzzParseInfo feeds driver_info as an API client may send it: the parser
// must never panic, and an accepted address is a clean scheme://host URL.
func FuzzParseInfo(f *testing.F) {
	for _, s := range []string{"10.0.0.5", "https://[fd00::1]:8443", "http://bmc/redfish/v1", "ftp://x", "https://:0", "", "%zz"} {
		f.Add(s, "/redfish/v1/Systems/1", "true")
	}
	f.Fuzz(func(t *testing.T, addr, sys, verify string) {
		n := &proto.Node{DriverInfo: proto.Dict{"redfish_address": addr, "redfish_system_id": sys, "redfish_verify_ca": verify}}
		in, err := ParseInfo(n)
		if err != nil {
			return
		}
		if !strings.HasPrefix(in.Endpoint, "http://") && !strings.HasPrefix(in.Endpoint, "https://") {
			t.Fatalf("endpoint %q from %q", in.Endpoint, addr)
		}
		if strings.Count(in.Endpoint, "/") != 2 {
			t.Fatalf("endpoint %q has a path (from %q)", in.Endpoint, addr)
		}
	})
}
