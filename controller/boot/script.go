package boot

import (
	"fmt"
	"net"
	"strings"
)

// Mode selects what an iPXE script boots.
type Mode string

const (
	// ModeAgent boots the deploy kernel and ramdisk (kiln-agent).
	ModeAgent Mode = "agent"
	// ModeLocal leaves iPXE so the firmware boots the next device, the
	// local disk: a deployed instance always boots from its disk.
	ModeLocal Mode = "localboot"
)

// RamdiskName is the name iPXE gives the downloaded ramdisk. The kernel
// command line carries initrd=RamdiskName because iPXE builds from before
// LoadFile2 support (Debian's 2019 ipxe-qemu among them) hand the ramdisk to
// the kernel's EFI stub only through their file system, by that name; BIOS
// boots ignore the argument.
const RamdiskName = "ramdisk"

// ScriptParams is everything one iPXE script depends on.
type ScriptParams struct {
	Mode       Mode
	KernelURL  string // deploy kernel (ModeAgent)
	RamdiskURL string // deploy ramdisk (ModeAgent)
	APIURL     string // the controller's API, given to the agent as ipa-api-url
	MAC        string // the booting NIC, aa:bb:cc:dd:ee:ff; becomes BOOTIF
	Console    string // kernel console, e.g. "ttyS0,115200n8"; empty for none
	ExtraArgs  []string
}

// RenderScript renders the iPXE script for p. It is pure: the same params
// give the same bytes (golden-file tested). Arguments are not checked here;
// see CheckArg.
func RenderScript(p ScriptParams) string {
	var b strings.Builder
	b.WriteString("#!ipxe\n")
	switch p.Mode {
	case ModeAgent:
		args := []string{"initrd=" + RamdiskName}
		if p.APIURL != "" {
			args = append(args, "ipa-api-url="+p.APIURL)
		}
		if p.MAC != "" {
			args = append(args, "BOOTIF="+BootIF(p.MAC))
		}
		if p.Console != "" {
			args = append(args, "console="+p.Console)
		}
		args = append(args, p.ExtraArgs...)
		fmt.Fprintf(&b, "# kiln: deploy ramdisk for %s\n", p.MAC)
		b.WriteString(":retry\n")
		b.WriteString("echo Kiln: loading the agent\n")
		fmt.Fprintf(&b, "kernel --name kernel %s %s || goto fail\n", p.KernelURL, strings.Join(args, " "))
		fmt.Fprintf(&b, "initrd --name %s %s || goto fail\n", RamdiskName, p.RamdiskURL)
		b.WriteString("boot || goto fail\n")
		b.WriteString(":fail\n")
		b.WriteString("echo Kiln: loading the agent failed, retrying in 10 seconds\n")
		b.WriteString("imgfree\n")
		b.WriteString("sleep 10\n")
		b.WriteString("goto retry\n")
	default: // ModeLocal, and the safe choice for anything unknown
		fmt.Fprintf(&b, "# kiln: local disk for %s\n", p.MAC)
		b.WriteString("echo Kiln: booting from local disk\n")
		// Under UEFI, exit returns to the boot manager, which tries the next
		// boot option. Under BIOS, exit can leave some firmware stuck, so
		// boot the first disk directly and exit only if that fails.
		b.WriteString("iseq ${platform} efi && goto exit ||\n")
		b.WriteString("sanboot --no-describe --drive 0x80 || goto exit\n")
		b.WriteString(":exit\n")
		b.WriteString("exit\n")
	}
	return b.String()
}

// ChainScript is served when the script URL carries no MAC (the DHCP server
// hands every iPXE client the same URL): it fetches the same URL again with
// the MAC of the NIC iPXE booted from (netX is the last opened device),
// hyphenated: iPXE would read "boot.ipxe?mac=52:…" up to the first colon as
// a URI scheme.
const ChainScript = "#!ipxe\nchain --autofree boot.ipxe?mac=${netX/mac:hexhyp} || exit\n"

// BootIF formats a MAC as PXELINUX's BOOTIF value, 01-aa-bb-cc-dd-ee-ff
// (ARP hardware type 1, ethernet), which ironic-python-agent and kiln-agent
// use to find the NIC they booted from.
func BootIF(mac string) string {
	return "01-" + strings.ToLower(strings.NewReplacer(":", "-").Replace(mac))
}

// ParseMAC accepts an ethernet MAC as iPXE prints it (aa:bb:cc:dd:ee:ff) or
// with hyphens (aa-bb-…, iPXE's :hexhyp) in either case, and returns it in
// canonical lower-case colon form.
func ParseMAC(s string) (string, error) {
	if len(s) != 17 {
		return "", fmt.Errorf("parse MAC %q: want 6 hex octets", s)
	}
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("parse MAC %q: want 6 hex octets", s)
	}
	return hw.String(), nil
}

// CheckArg reports whether s can go into a script verbatim: no whitespace
// or control characters (which would split or end the command line), and
// no "${" (iPXE would expand it as a setting).
func CheckArg(s string) error {
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("kernel argument %q: contains whitespace or a control character", s)
		}
	}
	if strings.Contains(s, "${") {
		return fmt.Errorf("kernel argument %q: contains ${, which iPXE would expand", s)
	}
	return nil
}
