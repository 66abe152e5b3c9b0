package redfish

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// Inspect is the "redfish" inspect interface: out-of-band inventory from the
// ComputerSystem and its Processors, EthernetInterfaces and storage.
type Inspect struct{ Pool *Pool }

// Validate checks driver_info and that the system answers.
func (i *Inspect) Validate(ctx context.Context, n *proto.Node) error {
	return validate(ctx, i.Pool, n)
}

// Inspect reads the inventory. Properties get cpus, cpu_arch, memory_mb and
// local_gb (largest disk, as Ironic's root-disk default, minus 1 GiB);
// MACs become the node's ports.
func (i *Inspect) Inspect(ctx context.Context, n *proto.Node) (driver.InspectResult, bool, error) {
	s, err := i.Pool.open(ctx, n)
	if err != nil {
		return driver.InspectResult{}, false, err
	}
	sys, err := s.system()
	if err != nil {
		return driver.InspectResult{}, false, err
	}
	inv := proto.Inventory{
		BMCAddress: proto.NoBMCAddress, BMCV6Address: proto.NoBMCV6Address,
		SystemVendor: proto.SystemVendor{ProductName: sys.Model, SerialNumber: sys.SerialNumber, Manufacturer: sys.Manufacturer,
			Firmware: proto.Firmware{Version: sys.BiosVersion}},
	}
	if c := sys.ProcessorSummary.Count; c != nil {
		inv.CPU.Count = int(*c)
	}
	inv.CPU.ModelName = sys.ProcessorSummary.Model
	procs, err := sys.Processors()
	if err != nil {
		return driver.InspectResult{}, false, s.fail("list processors", err)
	}
	threads := 0
	for _, p := range procs {
		if inv.CPU.Architecture == "" {
			inv.CPU.Architecture = cpuArch(p.ProcessorArchitecture, p.InstructionSet)
		}
		if inv.CPU.ModelName == "" {
			inv.CPU.ModelName = p.Model
		}
		if p.TotalThreads != nil {
			threads += int(*p.TotalThreads)
		}
	}
	// A processor that states no thread count adds none: as in Ironic, a
	// BMC that gives no count fails the inspection rather than reporting
	// one CPU per socket.
	if threads > 0 {
		inv.CPU.Count = threads
	}
	inv.CPU.SocketCount = len(procs)
	if m := sys.MemorySummary.TotalSystemMemoryGiB; m != nil {
		inv.Memory.PhysicalMB = int64(*m * 1024)
		inv.Memory.Total = inv.Memory.PhysicalMB << 20
	}
	nics, err := sys.EthernetInterfaces()
	if err != nil {
		return driver.InspectResult{}, false, s.fail("list ethernet interfaces", err)
	}
	var macs []string
	for _, e := range nics {
		mac := strings.ToLower(e.MACAddress)
		if mac == "" {
			mac = strings.ToLower(e.PermanentMACAddress)
		}
		if mac == "" {
			continue
		}
		macs = append(macs, mac)
		inv.Interfaces = append(inv.Interfaces, proto.Interface{Name: e.ID, MACAddress: mac, HasCarrier: e.LinkStatus == schemas.LinkUpLinkStatus})
	}
	sort.Strings(macs)
	disks, err := s.disks(sys)
	if err != nil {
		return driver.InspectResult{}, false, err
	}
	inv.Disks = disks
	var largest int64
	for _, d := range disks {
		largest = max(largest, d.Size)
	}
	props := proto.Dict{}
	if inv.CPU.Count > 0 {
		props["cpus"] = inv.CPU.Count
	}
	if inv.Memory.PhysicalMB > 0 {
		props["memory_mb"] = inv.Memory.PhysicalMB
	}
	if inv.CPU.Architecture != "" {
		props["cpu_arch"] = inv.CPU.Architecture
	}
	if largest > 0 {
		props["local_gb"] = max(largest>>30-1, 0)
	}
	if err := essentialProperties(n, props); err != nil {
		return driver.InspectResult{}, false, err
	}
	return driver.InspectResult{Properties: props, MACs: macs, Inventory: inv}, false, nil
}

// essentialProperties applies Ironic's rule for out-of-band inspection:
// cpus, memory_mb and cpu_arch must be known, from the BMC or already on
// the node, or the inspection fails; a missing local_gb is only a warning
// and becomes 0 (a disk-less node).
func essentialProperties(n *proto.Node, props proto.Dict) error {
	var missing []string
	for _, k := range []string{"cpu_arch", "cpus", "memory_mb"} {
		if _, ok := props[k]; !ok && !known(n.Properties[k]) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("Failed to discover the following properties: %s on node %s", strings.Join(missing, ", "), n.UUID)
	}
	if _, ok := props["local_gb"]; !ok {
		slog.Warn("redfish inspection found no disk of 4 GiB or more: local_gb is 0, assuming a disk-less node", "node", n.UUID)
		props["local_gb"] = 0
	}
	return nil
}

// known reports whether a property value says something (not absent,
// empty or zero).
func known(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != "" && x != "0"
	case float64:
		return x != 0
	case int:
		return x != 0
	case int64:
		return x != 0
	}
	return true
}

// disks reads Storage drives, falling back to SimpleStorage devices; a BMC
// that exposes neither gives none.
func (s *session) disks(sys *schemas.ComputerSystem) ([]proto.Disk, error) {
	var out []proto.Disk
	stores, err := sys.Storage()
	if err != nil {
		return nil, s.fail("list storage", err)
	}
	for _, st := range stores {
		drives, err := st.Drives()
		if err != nil {
			return nil, s.fail("list drives of "+st.ODataID, err)
		}
		for _, d := range drives {
			disk := proto.Disk{Name: d.Name, Model: proto.NullString(d.Model)}
			if d.CapacityBytes != nil {
				disk.Size = int64(*d.CapacityBytes)
			}
			out = append(out, disk)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	simple, err := sys.SimpleStorage()
	if err != nil {
		return nil, s.fail("list simple storage", err)
	}
	for _, st := range simple {
		for _, d := range st.Devices {
			if d.CapacityBytes == nil {
				continue
			}
			out = append(out, proto.Disk{Name: d.Name, Model: proto.NullString(d.Model), Size: int64(*d.CapacityBytes)})
		}
	}
	return out, nil
}

// cpuArch maps Redfish ProcessorArchitecture/InstructionSet to the kernel's
// names, which Ironic's cpu_arch uses.
func cpuArch(arch schemas.ProcessorArchitecture, is schemas.InstructionSet) string {
	switch is {
	case "x86-64":
		return "x86_64"
	case "ARM-A64":
		return "aarch64"
	case "x86":
		return "i686"
	case "PowerISA":
		return "ppc64le"
	}
	switch strings.ToLower(string(arch)) {
	case "x86":
		return "x86_64"
	case "arm":
		return "aarch64"
	case "power":
		return "ppc64le"
	}
	if arch != "" {
		return fmt.Sprint(arch)
	}
	return ""
}
