package inventory

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

	"github.com/kilnhq/kiln/proto"
)

// readInterfaces lists the physical network interfaces under
// root/sys/class/net: those backed by a device (so not lo, bridges, bonds,
// VLANs, veth or tunnels), as IPA does. Addresses are looked up only on a real
// root, since a fixture's interface names do not exist in the kernel.
func readInterfaces(root string, log *slog.Logger) ([]proto.Interface, error) {
	dir := filepath.Join(root, "sys/class/net")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	ifaces := []proto.Interface{}
	for _, e := range entries {
		name := e.Name()
		sys := filepath.Join(dir, name)
		if name == "lo" || !exists(filepath.Join(sys, "device")) {
			continue
		}
		ifc := proto.Interface{
			Name:       name,
			MACAddress: readString(filepath.Join(sys, "address")),
			// carrier cannot be read while the link is down: no carrier.
			HasCarrier: readString(filepath.Join(sys, "carrier")) == "1",
		}
		if s, err := strconv.Atoi(readString(filepath.Join(sys, "speed"))); err == nil && s > 0 {
			ifc.SpeedMbps = s
		}
		if drv, err := filepath.EvalSymlinks(filepath.Join(sys, "device/driver")); err == nil {
			ifc.Driver = proto.NullString(filepath.Base(drv))
		}
		ifc.Vendor = proto.NullString(readString(filepath.Join(sys, "device/vendor")))
		ifc.Product = proto.NullString(readString(filepath.Join(sys, "device/device")))
		if real, err := filepath.EvalSymlinks(filepath.Join(sys, "device")); err == nil {
			ifc.PCIAddress = proto.NullString(nearestPCI(real))
		}
		if root == "/" {
			ifc.IPv4Address, ifc.IPv6Address = addresses(name, log)
		}
		ifaces = append(ifaces, ifc)
	}
	sort.Slice(ifaces, func(i, j int) bool { return ifaces[i].Name < ifaces[j].Name })
	return ifaces, nil
}

// pciRE matches a PCI function address ("0000:00:1f.2").
var pciRE = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// nearestPCI returns the PCI address of the device at path or of its closest
// PCI ancestor (virtio-net sits under a virtioN device under the PCI function).
func nearestPCI(path string) string {
	for p := path; p != "/" && p != "." && p != ""; p = filepath.Dir(p) {
		if pciRE.MatchString(filepath.Base(p)) {
			return filepath.Base(p)
		}
	}
	return ""
}

// addresses returns the first global IPv4 and IPv6 address of an interface.
func addresses(name string, log *slog.Logger) (v4, v6 proto.NullString) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		log.Debug("look up interface", "name", name, "err", err)
		return "", ""
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		log.Debug("list interface addresses", "name", name, "err", err)
		return "", ""
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip := ipn.IP
		switch {
		case ip.To4() != nil && v4 == "":
			v4 = proto.NullString(ip.String())
		case ip.To4() == nil && v6 == "" && !ip.IsLinkLocalUnicast():
			v6 = proto.NullString(ip.String())
		}
	}
	return v4, v6
}
