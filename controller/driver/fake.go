package driver

// FakeHardware is the hardware type that touches nothing; it drives thousands of
// nodes in tests and demos. It is enabled from the start.
const FakeHardware = "fake-hardware"

func init() {
	supported := map[string][]string{
		"network": {"noop", "flat"},
		"storage": {"noop"},
	}
	for _, iface := range Interfaces {
		if _, ok := supported[iface]; !ok {
			supported[iface] = []string{"fake", "no-" + iface}
		}
	}
	supported["deploy"] = []string{"fake", "direct", "custom-agent", "ramdisk"}
	supported["boot"] = []string{"fake", "ipxe", "redfish-virtual-media"}
	supported["inspect"] = []string{"fake", "agent", "no-inspect"}
	Register(HardwareType{
		Name:        FakeHardware,
		Supported:   supported,
		BootDevices: []string{"pxe", "disk", "cdrom", "bios", "safe"},
	})
}
