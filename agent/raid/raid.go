// Package raid is kiln-agent's software RAID, as ironic-python-agent builds
// it: the raid interface's clean steps create_configuration and
// delete_configuration (and the deploy steps apply_configuration and
// delete_configuration) read the node's target_raid_config, partition the
// member disks, and assemble md arrays with mdadm.
//
// create_configuration: logical disks with controller "software" (one or
// two; the first RAID-1), members chosen by physical_disks hints or every
// disk, a new partition table on each member (GPT for UEFI, else
// disk_label or MBR) with the space IPA leaves for an ESP or a BIOS boot
// partition, one partition per logical disk (MAX last), then
// `mdadm --create /dev/mdN --metadata=1 --level L --name NAME`. It reports
// target_raid_config back, which the controller stores as raid_config.
//
// delete_configuration: every md array on the disks the agent may touch is
// wiped and stopped, the md superblocks of its members zeroed, and the
// partition tables of its disks erased.
//
// The md devices then stand in for their disks: disk.Enumerate lists them,
// root device hints can name them, and the disks holding an array are no
// longer root device candidates.
package raid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/erase"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/internal/syspath"
	"github.com/kilnhq/kiln/proto"
)

// Options tune a Manager; the zero value works in the ramdisk.
type Options struct {
	// SysRoot is where sysfs is mounted ("" = /sys).
	SysRoot string
	// Devices lists the disks (nil: disk.Enumerate, with the allowlisted
	// loop devices).
	Devices func(s steps.Safety) ([]disk.Device, error)
	// Run runs a tool (mdadm) and returns its combined output (nil: exec).
	Run func(ctx context.Context, argv ...string) ([]byte, error)
	// BootMode is the mode the ramdisk booted in, the default when the node
	// names none (nil: uefi when /sys/firmware/efi exists).
	BootMode func() string
	Log      *slog.Logger
}

// Manager runs the software RAID steps.
type Manager struct{ opts Options }

// New returns a Manager.
func New(opts Options) *Manager {
	if opts.SysRoot == "" {
		opts.SysRoot = disk.DefaultSysRoot
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Run == nil {
		opts.Run = func(ctx context.Context, argv ...string) ([]byte, error) {
			out, err := exec.CommandContext(ctx, toolPath(argv[0]), argv[1:]...).CombinedOutput()
			if err != nil {
				return out, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
			}
			return out, nil
		}
	}
	if opts.BootMode == nil {
		root := opts.SysRoot
		opts.BootMode = func() string {
			if _, err := os.Stat(filepath.Join(root, "firmware/efi")); err == nil {
				return "uefi"
			}
			return "bios"
		}
	}
	return &Manager{opts: opts}
}

// toolPath finds a tool in PATH, else in the sbin directories (the
// initramfs ships mdadm as /usr/sbin/mdadm; a user's PATH may lack sbin).
func toolPath(name string) string {
	if p, err := syspath.LookPath(name); err == nil {
		return p
	}
	return name
}

// Step names, as IPA's GenericHardwareManager offers them.
const (
	StepCreate = "create_configuration"
	StepDelete = "delete_configuration"
	StepApply  = "apply_configuration"
)

// Steps are the raid interface's steps, priority 0 (run when asked), as IPA
// declares them.
func (m *Manager) Steps() []steps.Def {
	step := func(name string) proto.Step {
		return proto.Step{Step: name, Priority: 0, Interface: "raid", Abortable: true}
	}
	apply := step(StepApply)
	apply.ArgsInfo = map[string]proto.ArgInfo{
		"raid_config":     {Description: "The RAID configuration to apply.", Required: true},
		"delete_existing": {Description: "Setting this to 'True' indicates to delete existing RAID configuration prior to creating the new configuration. Default value is 'True'.", Required: false},
	}
	return []steps.Def{
		{Kind: proto.StepClean, Step: step(StepDelete), Run: m.deleteStep},
		{Kind: proto.StepClean, Step: step(StepCreate), Run: m.createStep},
		{Kind: proto.StepDeploy, Step: step(StepDelete), Run: m.deleteStep},
		{Kind: proto.StepDeploy, Step: apply, Run: m.applyStep},
	}
}

func (m *Manager) createStep(ctx context.Context, call steps.Call) (any, error) {
	return m.Create(ctx, call.Node, call.Safety)
}

func (m *Manager) deleteStep(ctx context.Context, call steps.Call) (any, error) {
	return nil, m.Delete(ctx, call.Safety)
}

// applyStep is IPA's apply_configuration deploy step: the raid_config arg
// replaces target_raid_config; delete_existing (default true) first.
func (m *Manager) applyStep(ctx context.Context, call steps.Call) (any, error) {
	cfg, ok := call.Step.Args["raid_config"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("apply_configuration: raid_config must be an object")
	}
	if del, ok := call.Step.Args["delete_existing"]; !ok || del == true || del == "True" || del == "true" {
		if err := m.Delete(ctx, call.Safety); err != nil {
			return nil, err
		}
	}
	node := maps(call.Node)
	node["target_raid_config"] = cfg
	return m.Create(ctx, node, call.Safety)
}

func maps(n steps.Node) steps.Node {
	out := make(steps.Node, len(n)+1)
	for k, v := range n {
		out[k] = v
	}
	return out
}

// Create builds the node's target_raid_config and returns it, or {} when
// it asks for no software RAID.
func (m *Manager) Create(ctx context.Context, node steps.Node, s steps.Safety) (any, error) {
	lds, err := Target(node)
	if err != nil {
		return nil, fmt.Errorf("software RAID: %w", err)
	}
	if lds == nil {
		m.opts.Log.Info("no software RAID in target_raid_config")
		return map[string]any{}, nil
	}
	if !s.InRamdisk && len(s.Allow) == 0 {
		return nil, fmt.Errorf("refusing to build software RAID: the agent is not running in a ramdisk and no device was given with --allow-device")
	}
	devs, err := m.disks(s, skipDevices(node))
	if err != nil {
		return nil, err
	}
	if err := Validate(lds, len(devs)); err != nil {
		return nil, err
	}
	all, per, err := Members(devs, lds)
	if err != nil {
		return nil, fmt.Errorf("software RAID: %w", err)
	}
	sizes := map[string]int64{}
	for _, d := range devs {
		sizes[d.Name] = d.Size
	}
	bootMode, label := BootMode(node, m.opts.BootMode())
	plan, err := MakePlan(bootMode, label, lds, per, sizes)
	if err != nil {
		return nil, fmt.Errorf("software RAID: %w", err)
	}
	// Members must be empty, as IPA requires: no partitions left behind.
	for _, dev := range all {
		if err := s.Check(dev); err != nil {
			return nil, err
		}
		parts, err := disk.KernelPartitions(dev)
		if err == nil && len(parts) > 0 {
			return nil, fmt.Errorf("software RAID: partitions detected on %s during RAID config: run delete_configuration (or erase the disk) first", dev)
		}
	}
	m.opts.Log.Info("creating software RAID", "boot_mode", bootMode, "label", plan.Label, "disks", all)
	for _, dev := range all {
		if _, err := (&erase.Eraser{Guard: s, Log: m.opts.Log}).Metadata(ctx, dev); err != nil {
			return nil, fmt.Errorf("software RAID: %w", err)
		}
		if _, err := disk.WriteTable(ctx, s, dev, plan.Label, plan.Tables[dev]); err != nil {
			return nil, fmt.Errorf("software RAID: %w", err)
		}
	}
	for _, a := range plan.Arrays {
		md, err := m.freeMD(a.Index)
		if err != nil {
			return nil, err
		}
		name := a.Disk.VolumeName
		if name == "" {
			name = fmt.Sprintf("md%d", a.Index)
		}
		argv := []string{"mdadm", "--create", md, "--force", "--run", "--metadata=1", "--level", mdadmLevel(a.Disk.RAIDLevel),
			"--name", name, "--raid-devices", fmt.Sprint(len(a.Members))}
		if _, err := m.opts.Run(ctx, append(argv, a.Members...)...); err != nil {
			return nil, fmt.Errorf("software RAID: failed to create md device %s on %s: %w", md, strings.Join(a.Members, " "), err)
		}
		m.opts.Log.Info("md device created", "device", md, "name", name, "level", a.Disk.RAIDLevel, "members", a.Members)
	}
	cfg, _ := node["target_raid_config"].(map[string]any)
	return cfg, nil
}

// freeMD is /dev/md<index>, or the next md device the kernel does not have.
func (m *Manager) freeMD(index int) (string, error) {
	for i := index; i < 128; i++ {
		if _, err := os.Stat(filepath.Join(m.opts.SysRoot, "block", fmt.Sprintf("md%d", i))); errors.Is(err, os.ErrNotExist) {
			return fmt.Sprintf("/dev/md%d", i), nil
		}
	}
	return "", fmt.Errorf("software RAID: no free md device is left")
}

// Delete removes every md array built on disks s allows: the array's
// signatures erased and the array stopped, its members' superblocks zeroed,
// its disks' partition tables and signatures erased (erase_devices_metadata's
// eraser, so only mdadm runs outside Go). In the ramdisk it first assembles
// the arrays the disks hold (mdadm --assemble --scan), as IPA does.
func (m *Manager) Delete(ctx context.Context, s steps.Safety) error {
	if !s.InRamdisk && len(s.Allow) == 0 {
		return fmt.Errorf("refusing to delete software RAID: the agent is not running in a ramdisk and no device was given with --allow-device")
	}
	if s.InRamdisk {
		if out, err := m.opts.Run(ctx, "mdadm", "--assemble", "--scan"); err != nil {
			m.opts.Log.Debug("mdadm --assemble --scan", "out", string(out), "err", err)
		}
	}
	arrays, err := disk.MDArrays(m.opts.SysRoot)
	if err != nil {
		return err
	}
	eraser := &erase.Eraser{Guard: s, Log: m.opts.Log}
	var holders []string
	for _, a := range arrays {
		if len(a.Members) == 0 {
			continue // a partition of an array: goes with it
		}
		if slices.ContainsFunc(a.Disks, func(d string) bool { return s.Check(d) != nil }) {
			m.opts.Log.Info("leaving software RAID device alone: built on disks the agent may not touch", "device", a.Name, "disks", a.Disks)
			continue
		}
		m.opts.Log.Info("deleting software RAID device", "device", a.Name, "members", a.Members)
		if _, err := eraser.Metadata(ctx, a.Name); err != nil {
			m.opts.Log.Warn("erasing the md device's signatures failed", "device", a.Name, "err", err)
		}
		if _, err := m.opts.Run(ctx, "mdadm", "--stop", a.Name); err != nil {
			return fmt.Errorf("software RAID: stop %s: %w", a.Name, err)
		}
		for _, c := range a.Members {
			if _, err := m.opts.Run(ctx, "mdadm", "--zero-superblock", c); err != nil {
				return fmt.Errorf("software RAID: zero the md superblock of %s: %w", c, err)
			}
		}
		for _, d := range a.Disks {
			if !slices.Contains(holders, d) {
				holders = append(holders, d)
			}
		}
	}
	for _, d := range holders {
		if _, err := eraser.Metadata(ctx, d); err != nil {
			return fmt.Errorf("software RAID: remove the partitions of %s: %w", d, err)
		}
	}
	return nil
}

// disks lists the whole disks RAID may use: every disk in the ramdisk,
// only allowlisted ones elsewhere; never md devices nor skipped devices.
func (m *Manager) disks(s steps.Safety, skip []string) ([]disk.Device, error) {
	var devs []disk.Device
	var err error
	if m.opts.Devices != nil {
		devs, err = m.opts.Devices(s)
	} else {
		var loops []string
		for _, a := range s.Allow {
			if strings.HasPrefix(strings.TrimPrefix(a, "/dev/"), "loop") {
				loops = append(loops, a)
			}
		}
		devs, err = disk.Enumerate(m.opts.SysRoot, disk.EnumerateOptions{AllowLoop: loops})
	}
	if err != nil {
		return nil, fmt.Errorf("software RAID: list block devices: %w", err)
	}
	var out []disk.Device
	for _, d := range devs {
		if d.Kind == disk.KindMD || slices.Contains(skip, d.Name) || (!s.InRamdisk && s.Check(d.Name) != nil) {
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// skipDevices reads properties.skip_block_devices' names.
func skipDevices(node steps.Node) []string {
	props, _ := node["properties"].(map[string]any)
	list, _ := props["skip_block_devices"].([]any)
	var out []string
	for _, e := range list {
		if v, ok := e.(map[string]any); ok {
			if n, ok := v["name"].(string); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// BootMode is the node's boot mode and disk label as IPA reads them
// (get_node_boot_mode, get_partition_table_type_from_specs):
// instance_info.deploy_boot_mode, else the boot_mode capability (in
// instance_info or properties), else def; the disk_label capability.
func BootMode(node steps.Node, def string) (mode, label string) {
	ii, _ := node["instance_info"].(map[string]any)
	props, _ := node["properties"].(map[string]any)
	caps := capabilities(props["capabilities"])
	for k, v := range capabilities(ii["capabilities"]) {
		caps[k] = v
	}
	mode, _ = ii["deploy_boot_mode"].(string)
	if mode == "" {
		mode = caps["boot_mode"]
	}
	if mode == "" && caps["secure_boot"] == "true" {
		mode = "uefi"
	}
	if mode != "uefi" && mode != "bios" {
		mode = def
	}
	return mode, caps["disk_label"]
}

// capabilities reads "k1:v1,k2:v2" or an object.
func capabilities(v any) map[string]string {
	out := map[string]string{}
	switch c := v.(type) {
	case string:
		for _, kv := range strings.Split(c, ",") {
			if k, val, ok := strings.Cut(kv, ":"); ok {
				out[strings.TrimSpace(k)] = strings.TrimSpace(val)
			}
		}
	case map[string]any:
		for k, val := range c {
			if s, ok := val.(string); ok {
				out[k] = s
			}
		}
	}
	return out
}
