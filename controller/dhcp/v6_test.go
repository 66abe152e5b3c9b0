package dhcp

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

var (
	v6Server = netip.MustParseAddr("fd77::1")
	v6Prefix = netip.MustParsePrefix("fd77::/64")
	v6ID     = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
)

func cfg6(mode Mode) Config6 {
	return Config6{Mode: mode, ServerIP: v6Server, Prefix: v6Prefix, ServerID: v6ID,
		ScriptURL: "http://10.77.0.1:6385/boot/boot.ipxe", HTTPBootURL: "http://[fd77::1]:6385/boot/ipxe"}
}

func withVendorClass(class string) dhcpv6.Modifier {
	return dhcpv6.WithOption(&dhcpv6.OptVendorClass{EnterpriseNumber: enterpriseUEFI, Data: [][]byte{[]byte(class)}})
}

func solicit(t *testing.T, mac string, mods ...dhcpv6.Modifier) *dhcpv6.Message {
	t.Helper()
	hw, _ := net.ParseMAC(mac)
	m, err := dhcpv6.NewSolicit(hw, mods...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDecide6: who gets which boot file URL, with or without an address.
func TestDecide6(t *testing.T) {
	uefi := []dhcpv6.Modifier{dhcpv6.WithArchType(iana.EFI_X86_64), withVendorClass("PXEClient:Arch:00007:UNDI:003016")}
	http := []dhcpv6.Modifier{dhcpv6.WithArchType(iana.EFI_X86_64_HTTP), withVendorClass("HTTPClient:Arch:00016:UNDI:003001")}
	arm := []dhcpv6.Modifier{dhcpv6.WithArchType(iana.EFI_ARM64)}
	ipxe := []dhcpv6.Modifier{dhcpv6.WithUserClass([]byte("iPXE")), dhcpv6.WithArchType(iana.EFI_X86_64)}
	for _, tc := range []struct {
		name    string
		mode    Mode
		mods    []dhcpv6.Modifier
		silent  bool
		url     string
		class   string
		address bool
	}{
		{"UEFI PXE, full", ModeFull, uefi, false, "tftp://[fd77::1]/snponly.efi", "PXEClient", true},
		{"UEFI PXE, proxy: no address", ModeProxy, uefi, false, "tftp://[fd77::1]/snponly.efi", "PXEClient", false},
		{"UEFI HTTP boot echoes its class", ModeFull, http, false, "http://[fd77::1]:6385/boot/ipxe/snponly.efi", "HTTPClient", true},
		{"ARM64 UEFI", ModeProxy, arm, false, "tftp://[fd77::1]/snponly-arm64.efi", "PXEClient", false},
		{"iPXE is chained to the script", ModeFull, ipxe, false, "http://10.77.0.1:6385/boot/boot.ipxe", "", true},
		{"a host, full: an address only", ModeFull, nil, false, "", "", true},
		{"a host, proxy: silence", ModeProxy, nil, true, "", "", false},
		{"BIOS has no IPv6 PXE", ModeProxy, []dhcpv6.Modifier{dhcpv6.WithArchType(iana.INTEL_X86PC)}, true, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := solicit(t, "52:54:00:66:00:01", tc.mods...)
			r := Decide6(cfg6(tc.mode), m)
			if tc.silent {
				if r != nil {
					t.Fatalf("answered %s", r.Summary())
				}
				return
			}
			if r == nil {
				t.Fatal("no answer")
			}
			if r.Type() != dhcpv6.MessageTypeAdvertise || !r.Options.ServerID().Equal(v6ID) || !r.Options.ClientID().Equal(m.Options.ClientID()) {
				t.Errorf("reply %s", r.Summary())
			}
			if got := r.Options.BootFileURL(); got != tc.url {
				t.Errorf("boot file URL %q, want %q", got, tc.url)
			}
			if got := r.Options.VendorClass(enterpriseUEFI); (tc.class == "") != (len(got) == 0) || (tc.class != "" && string(got[0]) != tc.class) {
				t.Errorf("vendor class %q, want %q", got, tc.class)
			}
			ia := r.Options.OneIANA()
			if tc.address != (ia != nil) {
				t.Fatalf("IA_NA %v, want an address: %v", ia, tc.address)
			}
			if ia != nil {
				a, _ := netip.AddrFromSlice(ia.Options.OneAddress().IPv6Addr)
				if !v6Prefix.Contains(a) || a == v6Server {
					t.Errorf("address %s not a client address in %s", a, v6Prefix)
				}
			}
		})
	}
}

// TestDecide6Exchange: Request, Renew and Rebind get the address the
// Solicit was offered; a Request for another server, and message types a
// server does not answer, get silence; Information-Request gets the boot
// URL and no address; Release is acknowledged.
func TestDecide6Exchange(t *testing.T) {
	cfg := cfg6(ModeFull)
	sol := solicit(t, "52:54:00:66:00:02", dhcpv6.WithArchType(iana.EFI_X86_64))
	adv := Decide6(cfg, sol)
	offered := adv.Options.OneIANA().Options.OneAddress().IPv6Addr
	req, err := dhcpv6.NewRequestFromAdvertise(adv, dhcpv6.WithArchType(iana.EFI_X86_64))
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []dhcpv6.MessageType{dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind} {
		req.MessageType = typ
		r := Decide6(cfg, req)
		if r == nil || r.Type() != dhcpv6.MessageTypeReply || !r.Options.OneIANA().Options.OneAddress().IPv6Addr.Equal(offered) {
			t.Errorf("%s: reply %v, want the offered %s", typ, r, offered)
		}
	}
	other := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 9}}
	req.MessageType = dhcpv6.MessageTypeRequest
	req.UpdateOption(dhcpv6.OptServerID(other))
	if r := Decide6(cfg, req); r != nil {
		t.Errorf("request for another server answered: %s", r.Summary())
	}
	info := solicit(t, "52:54:00:66:00:02", dhcpv6.WithArchType(iana.EFI_X86_64))
	info.MessageType = dhcpv6.MessageTypeInformationRequest
	info.Options.Del(dhcpv6.OptionIANA)
	if r := Decide6(cfg, info); r == nil || r.Options.OneIANA() != nil || !strings.HasPrefix(r.Options.BootFileURL(), "tftp://") {
		t.Errorf("information request: %v", r)
	}
	rel := solicit(t, "52:54:00:66:00:02")
	rel.MessageType = dhcpv6.MessageTypeRelease
	if r := Decide6(cfg, rel); r == nil || r.Options.Status() == nil || r.Options.Status().StatusCode != iana.StatusSuccess {
		t.Errorf("release: %v", r)
	}
	rel.MessageType = dhcpv6.MessageTypeReconfigure
	if r := Decide6(cfg, rel); r != nil {
		t.Errorf("reconfigure answered: %s", r.Summary())
	}
}

// TestAddress6: stable per DUID and IAID, distinct across clients and IAs,
// inside the prefix, never the server's own address.
func TestAddress6(t *testing.T) {
	seen := map[netip.Addr]bool{}
	for i := range 2000 {
		duid := []byte{0, 3, 0, 1, 0x52, 0x54, 0, byte(i >> 8), byte(i), 1}
		for _, iaid := range [][4]byte{{0, 0, 0, 1}, {0, 0, 0, 2}} {
			a := Address6(v6Prefix, duid, iaid, v6Server)
			if a != Address6(v6Prefix, duid, iaid, v6Server) {
				t.Fatal("not stable")
			}
			if !v6Prefix.Contains(a) || a == v6Server || a == v6Prefix.Addr() {
				t.Fatalf("address %s", a)
			}
			if seen[a] {
				t.Fatalf("address %s given twice", a)
			}
			seen[a] = true
		}
	}
}
