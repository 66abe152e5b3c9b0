package hwmgr

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/hints"
	"github.com/kilnhq/kiln/agent/steps"
)

// candidates lists the whole disks steps may consider: every disk inside the
// ramdisk; outside it only the allowlisted ones (loop devices included when
// allowlisted). Devices named in skip are left out.
func (m *Manager) candidates(s steps.Safety, skip []string) ([]disk.Device, error) {
	var loops []string
	for _, a := range s.Allow {
		if strings.HasPrefix(strings.TrimPrefix(a, "/dev/"), "loop") {
			loops = append(loops, a)
		}
	}
	devs, err := m.enumerate(loops)
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	var out []disk.Device
	for _, d := range devs {
		if slices.Contains(skip, d.Name) {
			m.log.Info("skipping device listed in skip_block_devices", "device", d.Name)
			continue
		}
		if !s.InRamdisk && s.Check(d.Name) != nil {
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

func (m *Manager) enumerate(loops []string) ([]disk.Device, error) {
	if m.opts.Devices != nil {
		return m.opts.Devices()
	}
	return disk.Enumerate(m.opts.SysRoot, disk.EnumerateOptions{AllowLoop: loops})
}

// dict returns v as a JSON object, or nil.
func dict(v any) map[string]any {
	d, _ := v.(map[string]any)
	return d
}

// RootHints returns the root device hints in force: image_info.root_device,
// else the node's instance_info.root_device, else properties.root_device.
func RootHints(fromImage map[string]any, node steps.Node) (hints.Hints, error) {
	h := fromImage
	if len(h) == 0 {
		h = dict(dict(node["instance_info"])["root_device"])
	}
	if len(h) == 0 {
		h = dict(dict(node["properties"])["root_device"])
	}
	if len(h) == 0 {
		return nil, nil
	}
	hs, err := hints.ParseHints(h)
	if err != nil {
		return nil, fmt.Errorf("root device hints %v: %w", h, err)
	}
	return hs, nil
}

// SkipDevices reads properties.skip_block_devices: Ironic's list of
// {"name": "/dev/sdb"} objects ({"volume_name": …} entries name software RAID
// volumes, which the agent does not build, and are ignored); plain strings
// are accepted too.
func SkipDevices(node steps.Node) []string {
	list, _ := dict(node["properties"])["skip_block_devices"].([]any)
	var out []string
	for _, e := range list {
		switch v := e.(type) {
		case string:
			out = append(out, v)
		case map[string]any:
			if n, ok := v["name"].(string); ok && n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// RootDevice picks the disk an image goes to (IPA's get_os_install_device).
func (m *Manager) RootDevice(node steps.Node, imageHints map[string]any, s steps.Safety) (disk.Device, error) {
	hs, err := RootHints(imageHints, node)
	if err != nil {
		return disk.Device{}, err
	}
	skip := SkipDevices(node)
	devs, err := m.candidates(s, nil)
	if err != nil {
		return disk.Device{}, err
	}
	devs = m.withoutRAIDMembers(devs)
	if len(devs) == 0 {
		if !s.InRamdisk {
			return disk.Device{}, fmt.Errorf("no root device: the agent is not running in a ramdisk and no disk given with --allow-device %v exists", s.Allow)
		}
		return disk.Device{}, fmt.Errorf("no root device: the machine has no disk")
	}
	d, err := hints.SelectRoot(devs, hs, skip)
	if err != nil {
		return disk.Device{}, fmt.Errorf("choose the root device: %w", err)
	}
	if err := s.Check(d.Name); err != nil {
		return disk.Device{}, err
	}
	return d, nil
}

// withoutRAIDMembers drops the disks that hold a running software RAID
// array: the array (listed itself, /dev/mdN) stands in for them, so an image
// never lands on one member behind the array's back.
func (m *Manager) withoutRAIDMembers(devs []disk.Device) []disk.Device {
	if m.opts.Devices != nil {
		return devs // a test's fixed list: no sysfs to read
	}
	arrays, err := disk.MDArrays(m.opts.SysRoot)
	if err != nil {
		return devs
	}
	var held []string
	for _, a := range arrays {
		held = append(held, a.Disks...)
	}
	return slices.DeleteFunc(devs, func(d disk.Device) bool {
		if slices.Contains(held, d.Name) {
			m.log.Info("not a root device candidate: holds a software RAID array", "device", d.Name)
			return true
		}
		return false
	})
}
