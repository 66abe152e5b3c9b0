// Package dhcp is Kiln's embedded DHCP server (kiln serve --dhcp): it tells
// PXE firmware which iPXE binary to fetch by TFTP (or, for UEFI HTTP boot,
// by HTTP), tells iPXE the controller's script URL, and in full mode hands
// out addresses from a range kept in Kiln's database. Proxy mode answers
// only network-boot clients and never leases, so that it can sit beside the
// site's own DHCP server, as dnsmasq's proxy mode and Tinkerbell's smee do.
//
// What to answer is decided by Decide, a pure function of the request, the
// configuration and the address leased; the Server around it does the
// sockets, leases, rate limits and logging.
package dhcp

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// Mode is how the server answers.
type Mode string

const (
	// ModeProxy answers only PXE and HTTP-boot clients, with boot options
	// and no address (ProxyDHCP, ports 67 and 4011).
	ModeProxy Mode = "proxy"
	// ModeFull leases addresses and gives boot options to boot clients.
	ModeFull Mode = "full"
)

// Firmware is what kind of boot client sent a request.
type Firmware string

const (
	FirmwareNone      Firmware = ""           // not a boot client (full mode: an address only)
	FirmwareBIOS      Firmware = "bios"       // PXE, arch 0
	FirmwareUEFI      Firmware = "uefi-x64"   // PXE, arch 7 or 9
	FirmwareUEFIARM64 Firmware = "uefi-arm64" // PXE, arch 11
	FirmwareHTTP      Firmware = "http-x64"   // UEFI HTTP boot, arch 16
	FirmwareHTTPARM64 Firmware = "http-arm64" // UEFI HTTP boot, arch 19
	FirmwareIPXE      Firmware = "ipxe"       // iPXE itself (user class "iPXE")
	FirmwareOther     Firmware = "other"      // a boot client of an architecture Kiln has no binary for
)

// Client is what a request says about its sender.
type Client struct {
	MAC      net.HardwareAddr
	Firmware Firmware
	Arch     iana.Arch // option 93, if sent
	// HTTP: the vendor class is HTTPClient (the reply must echo it).
	HTTP bool
}

// Classify reads the client architecture (option 93), vendor class (60) and
// user class (77) of a request.
func Classify(m *dhcpv4.DHCPv4) Client {
	c := Client{MAC: m.ClientHWAddr}
	class := m.ClassIdentifier()
	pxe := strings.HasPrefix(class, "PXEClient")
	c.HTTP = strings.HasPrefix(class, "HTTPClient")
	archs := m.ClientArch()
	hasArch := len(archs) > 0
	if hasArch {
		c.Arch = archs[0]
	}
	c.Firmware = firmware(isIPXE(m), pxe, c.HTTP, c.Arch, hasArch, true)
	return c
}

// firmware names a boot client from what it said: whether it is iPXE, the
// PXE or HTTP marker of its vendor class, its architecture (hasArch false
// when it sent none). bios says whether a PXE client may be BIOS: over
// DHCPv4 old PXE ROMs leave the architecture out and are all BIOS; over
// DHCPv6 there is no BIOS PXE.
func firmware(ipxe, pxe, http bool, arch iana.Arch, hasArch, bios bool) Firmware {
	switch {
	case ipxe:
		return FirmwareIPXE
	case !pxe && !http:
		return FirmwareNone
	case http && arch == iana.EFI_X86_64_HTTP:
		return FirmwareHTTP
	case http && arch == iana.EFI_ARM64_HTTP:
		return FirmwareHTTPARM64
	case http:
		return FirmwareOther
	case bios && (!hasArch || arch == iana.INTEL_X86PC):
		return FirmwareBIOS
	case arch == iana.EFI_X86_64 || arch == iana.EFI_BC:
		return FirmwareUEFI
	case arch == iana.EFI_ARM64:
		return FirmwareUEFIARM64
	}
	return FirmwareOther
}

// optionIPXE is the option iPXE encapsulates its settings in; its presence
// marks iPXE builds that send no user class.
const optionIPXE = dhcpv4.GenericOptionCode(175)

func isIPXE(m *dhcpv4.DHCPv4) bool {
	for _, uc := range m.UserClass() {
		if uc == "iPXE" {
			return true
		}
	}
	return m.Options.Has(optionIPXE)
}

// BootFiles names the iPXE binary each firmware fetches. The defaults are
// the file names of Debian's ipxe package (/usr/lib/ipxe), except ARM64,
// which Debian builds only for arm64 hosts.
type BootFiles map[Firmware]string

// DefaultBootFiles: BIOS gets undionly.kpxe (it drives the NIC through the
// PXE ROM), UEFI snponly.efi (through the firmware's SNP driver), which
// works on any NIC the firmware knows.
var DefaultBootFiles = BootFiles{
	FirmwareBIOS:      "undionly.kpxe",
	FirmwareUEFI:      "snponly.efi",
	FirmwareUEFIARM64: "snponly-arm64.efi",
	FirmwareHTTP:      "snponly.efi",
	FirmwareHTTPARM64: "snponly-arm64.efi",
}

// Config is what Decide needs besides the request.
type Config struct {
	Mode Mode
	// ServerIP is this server's address on the interface: the server
	// identifier and the TFTP server.
	ServerIP netip.Addr
	// Netmask, Routers, DNS and LeaseTime go to clients in full mode.
	Netmask   net.IPMask
	Routers   []netip.Addr
	DNS       []netip.Addr
	LeaseTime time.Duration
	// ScriptURL is where iPXE is chained to: the controller's
	// /boot/boot.ipxe.
	ScriptURL string
	// HTTPBootURL is the base URL UEFI HTTP boot fetches the iPXE binary
	// under (the controller's /boot/ipxe/).
	HTTPBootURL string
	Files       BootFiles
}

// Request is one received message and what the server learnt about it.
type Request struct {
	Msg *dhcpv4.DHCPv4
	// Port is the server port it arrived on: 67, or 4011 (PXE boot
	// server requests in proxy mode).
	Port int
	// Lease is the address leased to the client (full mode), invalid if
	// none could be.
	Lease netip.Addr
}

// PXEPort is where PXE clients send their boot server requests (the PXE
// specification's "boot server discovery").
const PXEPort = 4011

// NeedsLease reports whether answering m needs the client's lease: full
// mode, a DISCOVER or a REQUEST meant for this server.
func NeedsLease(cfg Config, m *dhcpv4.DHCPv4, port int) bool {
	if cfg.Mode != ModeFull || port != dhcpv4.ServerPort {
		return false
	}
	switch m.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		return true
	case dhcpv4.MessageTypeRequest:
		return forUs(cfg, m)
	}
	return false
}

// forUs: a REQUEST names no server (a renewal) or this one.
func forUs(cfg Config, m *dhcpv4.DHCPv4) bool {
	sid := m.ServerIdentifier()
	return sid == nil || sid.Equal(net.IP(cfg.ServerIP.AsSlice()))
}

// Decide returns the reply to r, or nil when the server must stay silent
// (not a boot client in proxy mode, a request for another server, no
// address to give, a message type it does not answer).
func Decide(cfg Config, r Request) *dhcpv4.DHCPv4 {
	m := r.Msg
	if m.OpCode != dhcpv4.OpcodeBootRequest {
		return nil
	}
	c := Classify(m)
	if cfg.Mode == ModeProxy || r.Port == PXEPort {
		return decideProxy(cfg, r, c)
	}
	if cfg.Mode != ModeFull {
		return nil
	}
	switch m.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		if !r.Lease.IsValid() {
			return nil
		}
		return fullReply(cfg, m, c, dhcpv4.MessageTypeOffer, r.Lease)
	case dhcpv4.MessageTypeRequest:
		if !forUs(cfg, m) {
			return nil
		}
		want := m.RequestedIPAddress()
		if want == nil || want.IsUnspecified() {
			want = m.ClientIPAddr
		}
		if !r.Lease.IsValid() || !want.Equal(net.IP(r.Lease.AsSlice())) {
			return nak(cfg, m)
		}
		return fullReply(cfg, m, c, dhcpv4.MessageTypeAck, r.Lease)
	}
	return nil
}

func decideProxy(cfg Config, r Request, c Client) *dhcpv4.DHCPv4 {
	var typ dhcpv4.MessageType
	switch t := r.Msg.MessageType(); {
	case r.Port != PXEPort && t == dhcpv4.MessageTypeDiscover:
		typ = dhcpv4.MessageTypeOffer
	case r.Port == PXEPort && (t == dhcpv4.MessageTypeRequest || t == dhcpv4.MessageTypeInform):
		typ = dhcpv4.MessageTypeAck
	default:
		return nil
	}
	file, ok := bootFile(cfg, c)
	if !ok {
		return nil
	}
	reply, err := dhcpv4.NewReplyFromRequest(r.Msg,
		dhcpv4.WithMessageType(typ),
		dhcpv4.WithYourIP(net.IPv4zero),
		dhcpv4.WithServerIP(net.IP(cfg.ServerIP.AsSlice())),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP(cfg.ServerIP.AsSlice()))),
	)
	if err != nil {
		return nil
	}
	bootOptions(cfg, r.Msg, reply, c, file)
	return reply
}

func fullReply(cfg Config, m *dhcpv4.DHCPv4, c Client, typ dhcpv4.MessageType, lease netip.Addr) *dhcpv4.DHCPv4 {
	server := net.IP(cfg.ServerIP.AsSlice())
	mods := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(typ),
		dhcpv4.WithYourIP(net.IP(lease.AsSlice())),
		dhcpv4.WithServerIP(server),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(server)),
		dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(cfg.LeaseTime)),
	}
	if cfg.Netmask != nil {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptSubnetMask(cfg.Netmask)))
	}
	if len(cfg.Routers) > 0 {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptRouter(ips(cfg.Routers)...)))
	}
	if len(cfg.DNS) > 0 {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptDNS(ips(cfg.DNS)...)))
	}
	reply, err := dhcpv4.NewReplyFromRequest(m, mods...)
	if err != nil {
		return nil
	}
	if file, ok := bootFile(cfg, c); ok {
		bootOptions(cfg, m, reply, c, file)
	}
	return reply
}

func nak(cfg Config, m *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	reply, err := dhcpv4.NewReplyFromRequest(m,
		dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP(cfg.ServerIP.AsSlice()))),
	)
	if err != nil {
		return nil
	}
	return reply
}

// bootFile is what c should load: the iPXE script URL for iPXE, a TFTP
// file name for PXE firmware, an HTTP URL for UEFI HTTP boot.
func bootFile(cfg Config, c Client) (string, bool) {
	files := cfg.Files
	if files == nil {
		files = DefaultBootFiles
	}
	switch c.Firmware {
	case FirmwareIPXE:
		return cfg.ScriptURL, cfg.ScriptURL != ""
	case FirmwareBIOS, FirmwareUEFI, FirmwareUEFIARM64:
		f, ok := files[c.Firmware]
		return f, ok && f != ""
	case FirmwareHTTP, FirmwareHTTPARM64:
		f, ok := files[c.Firmware]
		if !ok || f == "" || cfg.HTTPBootURL == "" {
			return "", false
		}
		return strings.TrimSuffix(cfg.HTTPBootURL, "/") + "/" + f, true
	}
	return "", false
}

// pxeVendorOptions is PXE vendor sub-option 6 (discovery control): bit 3 (value 8) tells the
// client to load the boot file of this offer rather than run boot server
// discovery.
var pxeVendorOptions = []byte{6, 1, 8, 255}

func bootOptions(cfg Config, req, reply *dhcpv4.DHCPv4, c Client, file string) {
	reply.BootFileName = file
	reply.UpdateOption(dhcpv4.OptBootFileName(file))
	switch {
	case c.HTTP:
		// UEFI HTTP boot ignores answers that do not echo its class.
		reply.UpdateOption(dhcpv4.OptClassIdentifier("HTTPClient"))
	default:
		reply.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient"))
		if c.Firmware != FirmwareIPXE {
			reply.UpdateOption(dhcpv4.OptTFTPServerName(cfg.ServerIP.String()))
			reply.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionVendorSpecificInformation, bytes.Clone(pxeVendorOptions)))
		}
	}
	// PXE clients check that a ProxyDHCP answer carries their machine
	// identifier (option 97) back.
	if uuid := req.GetOneOption(dhcpv4.OptionClientMachineIdentifier); uuid != nil {
		reply.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionClientMachineIdentifier, bytes.Clone(uuid)))
	}
}

func ips(as []netip.Addr) []net.IP {
	out := make([]net.IP, len(as))
	for i, a := range as {
		out[i] = net.IP(a.AsSlice())
	}
	return out
}
