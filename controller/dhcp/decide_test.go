package dhcp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

var testCfg = Config{
	ServerIP:    netip.MustParseAddr("10.9.0.1"),
	Netmask:     net.CIDRMask(24, 32),
	Routers:     []netip.Addr{netip.MustParseAddr("10.9.0.254")},
	DNS:         []netip.Addr{netip.MustParseAddr("10.9.0.53")},
	LeaseTime:   time.Hour,
	ScriptURL:   "http://10.9.0.1:6385/boot/boot.ipxe",
	HTTPBootURL: "http://10.9.0.1:6385/boot/ipxe/",
}

var mac = net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}

func msg(t *testing.T, typ dhcpv4.MessageType, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(mac), dhcpv4.WithMessageType(typ)}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func pxe(arch iana.Arch) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(arch)),
	}
}

func httpBoot(arch iana.Arch) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00016:UNDI:003001")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(arch)),
	}
}

func with(ms []dhcpv4.Modifier, more ...dhcpv4.Modifier) []dhcpv4.Modifier {
	return append(append([]dhcpv4.Modifier{}, ms...), more...)
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		mods []dhcpv4.Modifier
		want Firmware
	}{
		{"plain DHCP client", nil, FirmwareNone},
		{"BIOS", pxe(iana.INTEL_X86PC), FirmwareBIOS},
		{"old BIOS ROM without option 93", []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient"))}, FirmwareBIOS},
		{"UEFI x86-64", pxe(iana.EFI_X86_64), FirmwareUEFI},
		{"UEFI BC", pxe(iana.EFI_BC), FirmwareUEFI},
		{"UEFI ARM64", pxe(iana.EFI_ARM64), FirmwareUEFIARM64},
		{"UEFI ia32", pxe(iana.EFI_IA32), FirmwareOther},
		{"HTTP boot x86-64", httpBoot(iana.EFI_X86_64_HTTP), FirmwareHTTP},
		{"HTTP boot ARM64", httpBoot(iana.EFI_ARM64_HTTP), FirmwareHTTPARM64},
		{"iPXE user class", with(pxe(iana.EFI_X86_64), dhcpv4.WithUserClass("iPXE", false)), FirmwareIPXE},
		{"iPXE RFC 3004 user class", with(pxe(iana.INTEL_X86PC), dhcpv4.WithUserClass("iPXE", true)), FirmwareIPXE},
		{"iPXE option 175", with(pxe(iana.INTEL_X86PC), dhcpv4.WithGeneric(optionIPXE, []byte{1, 1, 1})), FirmwareIPXE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(msg(t, dhcpv4.MessageTypeDiscover, tc.mods...)).Firmware; got != tc.want {
				t.Fatalf("firmware %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	lease := netip.MustParseAddr("10.9.0.100")
	other := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 9, 0, 2)))
	ours := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 9, 0, 1)))
	wantIP := func(ip string) dhcpv4.Modifier {
		return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(ip)))
	}
	type want struct {
		typ    dhcpv4.MessageType // 0: no reply
		yiaddr string
		file   string
		class  string
	}
	for _, tc := range []struct {
		name  string
		mode  Mode
		typ   dhcpv4.MessageType
		mods  []dhcpv4.Modifier
		port  int
		lease netip.Addr
		want  want
	}{
		{"proxy: plain client ignored", ModeProxy, dhcpv4.MessageTypeDiscover, nil, 67, netip.Addr{}, want{}},
		{"proxy: BIOS offer", ModeProxy, dhcpv4.MessageTypeDiscover, pxe(iana.INTEL_X86PC), 67, netip.Addr{},
			want{dhcpv4.MessageTypeOffer, "0.0.0.0", "undionly.kpxe", "PXEClient"}},
		{"proxy: UEFI offer", ModeProxy, dhcpv4.MessageTypeDiscover, pxe(iana.EFI_X86_64), 67, netip.Addr{},
			want{dhcpv4.MessageTypeOffer, "0.0.0.0", "snponly.efi", "PXEClient"}},
		{"proxy: ARM64 offer", ModeProxy, dhcpv4.MessageTypeDiscover, pxe(iana.EFI_ARM64), 67, netip.Addr{},
			want{dhcpv4.MessageTypeOffer, "0.0.0.0", "snponly-arm64.efi", "PXEClient"}},
		{"proxy: HTTP boot offer echoes HTTPClient", ModeProxy, dhcpv4.MessageTypeDiscover, httpBoot(iana.EFI_X86_64_HTTP), 67, netip.Addr{},
			want{dhcpv4.MessageTypeOffer, "0.0.0.0", "http://10.9.0.1:6385/boot/ipxe/snponly.efi", "HTTPClient"}},
		{"proxy: HTTP boot ARM64", ModeProxy, dhcpv4.MessageTypeDiscover, httpBoot(iana.EFI_ARM64_HTTP), 67, netip.Addr{},
			want{dhcpv4.MessageTypeOffer, "0.0.0.0", "http://10.9.0.1:6385/boot/ipxe/snponly-arm64.efi", "HTTPClient"}},
		{"proxy: iPXE chained to the script", ModeProxy, dhcpv4.MessageTypeDiscover, with(pxe(iana.EFI_X86_64), dhcpv4.WithUserClass("iPXE", false)), 67, netip.Addr{},
			want{dhcpv4.MessageTypeOffer, "0.0.0.0", "http://10.9.0.1:6385/boot/boot.ipxe", "PXEClient"}},
		{"proxy: unknown arch ignored", ModeProxy, dhcpv4.MessageTypeDiscover, pxe(iana.EFI_IA32), 67, netip.Addr{}, want{}},
		{"proxy: REQUEST on 67 is the real server's", ModeProxy, dhcpv4.MessageTypeRequest, with(pxe(iana.INTEL_X86PC), other), 67, netip.Addr{}, want{}},
		{"proxy: REQUEST on 4011 acked", ModeProxy, dhcpv4.MessageTypeRequest, pxe(iana.EFI_X86_64), PXEPort, netip.Addr{},
			want{dhcpv4.MessageTypeAck, "0.0.0.0", "snponly.efi", "PXEClient"}},
		{"proxy: never leases even when handed one", ModeProxy, dhcpv4.MessageTypeDiscover, pxe(iana.INTEL_X86PC), 67, lease,
			want{dhcpv4.MessageTypeOffer, "0.0.0.0", "undionly.kpxe", "PXEClient"}},
		{"full: plain client gets an address, no boot file", ModeFull, dhcpv4.MessageTypeDiscover, nil, 67, lease,
			want{dhcpv4.MessageTypeOffer, "10.9.0.100", "", ""}},
		{"full: BIOS offer", ModeFull, dhcpv4.MessageTypeDiscover, pxe(iana.INTEL_X86PC), 67, lease,
			want{dhcpv4.MessageTypeOffer, "10.9.0.100", "undionly.kpxe", "PXEClient"}},
		{"full: iPXE offer", ModeFull, dhcpv4.MessageTypeDiscover, with(pxe(iana.INTEL_X86PC), dhcpv4.WithUserClass("iPXE", false)), 67, lease,
			want{dhcpv4.MessageTypeOffer, "10.9.0.100", "http://10.9.0.1:6385/boot/boot.ipxe", "PXEClient"}},
		{"full: no address, no offer", ModeFull, dhcpv4.MessageTypeDiscover, pxe(iana.INTEL_X86PC), 67, netip.Addr{}, want{}},
		{"full: REQUEST of the lease acked", ModeFull, dhcpv4.MessageTypeRequest, with(pxe(iana.EFI_X86_64), ours, wantIP("10.9.0.100")), 67, lease,
			want{dhcpv4.MessageTypeAck, "10.9.0.100", "snponly.efi", "PXEClient"}},
		{"full: renewal by ciaddr acked", ModeFull, dhcpv4.MessageTypeRequest, []dhcpv4.Modifier{dhcpv4.WithClientIP(net.ParseIP("10.9.0.100"))}, 67, lease,
			want{dhcpv4.MessageTypeAck, "10.9.0.100", "", ""}},
		{"full: REQUEST of another address nak'd", ModeFull, dhcpv4.MessageTypeRequest, with(nil, ours, wantIP("10.9.0.7")), 67, lease,
			want{typ: dhcpv4.MessageTypeNak, yiaddr: "0.0.0.0"}},
		{"full: REQUEST for another server ignored", ModeFull, dhcpv4.MessageTypeRequest, with(nil, other, wantIP("10.9.0.100")), 67, lease, want{}},
		{"full: RELEASE not answered", ModeFull, dhcpv4.MessageTypeRelease, nil, 67, lease, want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testCfg
			cfg.Mode = tc.mode
			m := msg(t, tc.typ, tc.mods...)
			got := Decide(cfg, Request{Msg: m, Port: tc.port, Lease: tc.lease})
			if tc.want.typ == 0 {
				if got != nil {
					t.Fatalf("answered %s", got.Summary())
				}
				return
			}
			if got == nil {
				t.Fatal("no answer")
			}
			if got.MessageType() != tc.want.typ || got.YourIPAddr.String() != tc.want.yiaddr ||
				got.BootFileName != tc.want.file || got.ClassIdentifier() != tc.want.class {
				t.Fatalf("got %s yiaddr %s file %q class %q; want %+v", got.MessageType(), got.YourIPAddr, got.BootFileName, got.ClassIdentifier(), tc.want)
			}
			if got.TransactionID != m.TransactionID || got.ClientHWAddr.String() != mac.String() {
				t.Fatal("reply does not match the request's xid and MAC")
			}
			if !got.ServerIdentifier().Equal(net.IPv4(10, 9, 0, 1)) {
				t.Fatalf("server identifier %v", got.ServerIdentifier())
			}
			if tc.want.typ == dhcpv4.MessageTypeNak {
				return
			}
			if got.BootFileNameOption() != tc.want.file {
				t.Fatalf("option 67 %q, file field %q", got.BootFileNameOption(), got.BootFileName)
			}
			tftp := tc.want.file != "" && tc.want.class == "PXEClient" && Classify(m).Firmware != FirmwareIPXE
			if tftp != (got.TFTPServerName() == "10.9.0.1") || !got.ServerIPAddr.Equal(net.IPv4(10, 9, 0, 1)) {
				t.Fatalf("TFTP server %q siaddr %s; want a TFTP server named: %v", got.TFTPServerName(), got.ServerIPAddr, tftp)
			}
			full := tc.mode == ModeFull
			if full != (got.SubnetMask() != nil) || full != (len(got.Router()) == 1) || full != (len(got.DNS()) == 1) ||
				full != (got.IPAddressLeaseTime(0) == time.Hour) {
				t.Fatalf("network options mask %v routers %v dns %v lease %v in %s mode", got.SubnetMask(), got.Router(), got.DNS(), got.IPAddressLeaseTime(0), tc.mode)
			}
		})
	}
}

func TestDecideEchoesMachineID(t *testing.T) {
	id := append([]byte{0}, make([]byte, 16)...)
	id[5] = 0x42
	m := msg(t, dhcpv4.MessageTypeDiscover, with(pxe(iana.EFI_X86_64), dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, id))...)
	cfg := testCfg
	cfg.Mode = ModeProxy
	got := Decide(cfg, Request{Msg: m, Port: 67})
	if got == nil || string(got.GetOneOption(dhcpv4.OptionClientMachineIdentifier)) != string(id) {
		t.Fatalf("option 97 not echoed: %v", got)
	}
	if v := got.GetOneOption(dhcpv4.OptionVendorSpecificInformation); string(v) != string(pxeVendorOptions) {
		t.Fatalf("PXE vendor options %x", v)
	}
}

func TestNeedsLease(t *testing.T) {
	full := testCfg
	full.Mode = ModeFull
	proxy := testCfg
	proxy.Mode = ModeProxy
	other := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 9, 0, 2)))
	for _, tc := range []struct {
		name string
		cfg  Config
		typ  dhcpv4.MessageType
		mods []dhcpv4.Modifier
		port int
		want bool
	}{
		{"full discover", full, dhcpv4.MessageTypeDiscover, nil, 67, true},
		{"full request", full, dhcpv4.MessageTypeRequest, nil, 67, true},
		{"full request for another server", full, dhcpv4.MessageTypeRequest, []dhcpv4.Modifier{other}, 67, false},
		{"full release", full, dhcpv4.MessageTypeRelease, nil, 67, false},
		{"full on 4011", full, dhcpv4.MessageTypeRequest, nil, PXEPort, false},
		{"proxy discover", proxy, dhcpv4.MessageTypeDiscover, nil, 67, false},
	} {
		if got := NeedsLease(tc.cfg, msg(t, tc.typ, tc.mods...), tc.port); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
