package dhcp

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// DHCPv6 boot, for firmware that network-boots over IPv6 (UEFI PXE and
// HTTP boot over IPv6, iPXE): the boot file URL option (59) answers the
// same question DHCPv4's boot file name does. Kiln answers it as it answers
// DHCPv4: only boot clients in proxy mode; in full mode every client gets an
// address too. Addresses need no lease table: each client's address is the
// interface's /64 prefix with an interface identifier derived from the
// client's DUID and IAID, so it is the same after a restart and on every
// controller that serves the segment, and 2^64 identifiers make collisions
// negligible (RFC 7217 derives stable addresses the same way).

// Config6 is what Decide6 needs besides the message.
type Config6 struct {
	Mode Mode
	// ServerIP is this server's global (or unique-local) IPv6 address on
	// the interface: the TFTP server in boot file URLs.
	ServerIP netip.Addr
	// Prefix is the /64 addresses are made in (full mode).
	Prefix netip.Prefix
	// ServerID is this server's DUID.
	ServerID dhcpv6.DUID
	// LeaseTime is the preferred and valid lifetime of addresses [1h].
	LeaseTime time.Duration
	// ScriptURL, HTTPBootURL and Files are Config's.
	ScriptURL   string
	HTTPBootURL string
	Files       BootFiles
	// DNS servers handed out in full mode.
	DNS []netip.Addr
}

// enterpriseUEFI is the IANA enterprise number UEFI uses in its DHCPv6
// vendor class ("PXEClient…" / "HTTPClient…").
const enterpriseUEFI = 343

// Classify6 reads a DHCPv6 message's client architecture (option 61),
// vendor class (16) and user class (15).
func Classify6(m *dhcpv6.Message) Client {
	var c Client
	var pxe bool
	for _, vc := range m.Options.VendorClasses() {
		for _, d := range vc.Data {
			switch s := string(d); {
			case strings.HasPrefix(s, "HTTPClient"):
				c.HTTP = true
			case strings.HasPrefix(s, "PXEClient"):
				pxe = true
			}
		}
	}
	archs := m.Options.ArchTypes()
	if len(archs) > 0 {
		c.Arch = archs[0]
		pxe = pxe || !c.HTTP // option 61 marks a network-boot client
	}
	ipxe := false
	for _, uc := range m.Options.UserClasses() {
		if string(uc) == "iPXE" {
			ipxe = true
		}
	}
	c.Firmware = firmware(ipxe, pxe, c.HTTP, c.Arch, len(archs) > 0, false)
	return c
}

// bootFileURL6 is what c should load over IPv6: TFTP URLs for PXE firmware
// (option 59 is a URL, unlike DHCPv4's file name), HTTP for HTTP boot, the
// script for iPXE.
func bootFileURL6(cfg Config6, c Client) (string, bool) {
	if c.Firmware == FirmwareUEFI || c.Firmware == FirmwareUEFIARM64 {
		files := cfg.Files
		if files == nil {
			files = DefaultBootFiles
		}
		f := files[c.Firmware]
		if f == "" || !cfg.ServerIP.IsValid() {
			return "", false
		}
		return fmt.Sprintf("tftp://[%s]/%s", cfg.ServerIP, f), true
	}
	return bootFile(Config{ScriptURL: cfg.ScriptURL, HTTPBootURL: cfg.HTTPBootURL, Files: cfg.Files}, c)
}

// Address6 is the address full mode gives the client with this DUID and
// IAID: prefix + the first 64 bits of SHA-256(DUID, IAID), never the
// all-zero or the server's own identifier.
func Address6(prefix netip.Prefix, duid []byte, iaid [4]byte, server netip.Addr) netip.Addr {
	h := sha256.New()
	h.Write(duid)
	h.Write(iaid[:])
	for i := byte(0); ; i++ {
		sum := h.Sum([]byte{i})
		b := prefix.Masked().Addr().As16()
		id := binary.BigEndian.Uint64(sum[:8])
		if id == 0 {
			continue
		}
		binary.BigEndian.PutUint64(b[8:], id)
		a := netip.AddrFrom16(b)
		if a != server {
			return a
		}
	}
}

// Decide6 answers one DHCPv6 message, or returns nil to stay silent: in
// proxy mode every client that is not a boot client; a message meant for
// another server (its server identifier is not ours); message types a
// server does not answer.
func Decide6(cfg Config6, m *dhcpv6.Message) *dhcpv6.Message {
	cid := m.Options.ClientID()
	if cid == nil {
		return nil
	}
	if sid := m.Options.ServerID(); sid != nil && !sid.Equal(cfg.ServerID) {
		return nil
	}
	c := Classify6(m)
	file, boot := bootFileURL6(cfg, c)
	if cfg.Mode == ModeProxy && !boot {
		return nil
	}
	var reply *dhcpv6.Message
	var err error
	switch m.Type() {
	case dhcpv6.MessageTypeSolicit:
		if m.GetOneOption(dhcpv6.OptionRapidCommit) != nil && cfg.Mode == ModeFull {
			reply, err = dhcpv6.NewReplyFromMessage(m)
		} else {
			reply, err = dhcpv6.NewAdvertiseFromSolicit(m)
		}
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind,
		dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeInformationRequest, dhcpv6.MessageTypeRelease:
		reply, err = dhcpv6.NewReplyFromMessage(m)
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	reply.AddOption(dhcpv6.OptServerID(cfg.ServerID))
	if m.Type() == dhcpv6.MessageTypeRelease {
		reply.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess, StatusMessage: "released"})
		return reply
	}
	lifetime := cfg.LeaseTime
	if lifetime <= 0 {
		lifetime = time.Hour
	}
	if cfg.Mode == ModeFull && m.Type() != dhcpv6.MessageTypeInformationRequest {
		for _, ia := range m.Options.IANA() {
			addr := Address6(cfg.Prefix, cid.ToBytes(), ia.IaId, cfg.ServerIP)
			reply.AddOption(&dhcpv6.OptIANA{IaId: ia.IaId, T1: lifetime / 2, T2: lifetime * 4 / 5,
				Options: dhcpv6.IdentityOptions{Options: []dhcpv6.Option{&dhcpv6.OptIAAddress{
					IPv6Addr: net.IP(addr.AsSlice()), PreferredLifetime: lifetime, ValidLifetime: lifetime}}}})
		}
		if len(cfg.DNS) > 0 {
			reply.AddOption(dhcpv6.OptDNS(ips(cfg.DNS)...))
		}
	}
	if boot {
		reply.AddOption(dhcpv6.OptBootFileURL(file))
		// UEFI ignores answers that do not carry its vendor class back.
		class := "PXEClient"
		if c.HTTP {
			class = "HTTPClient"
		}
		if c.Firmware != FirmwareIPXE {
			reply.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: enterpriseUEFI, Data: [][]byte{[]byte(class)}})
		}
	}
	return reply
}
