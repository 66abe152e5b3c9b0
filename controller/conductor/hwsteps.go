package conductor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Out-of-band steps: the clean and service steps of a node's hardware
// configuration interfaces (bios, raid, firmware, management), offered to
// the decision core as Input.DriverSteps and run here, under the node's
// reservation, when it hands one over (decide.DriverStep). They join the
// agent's steps when a flow is planned, so manual cleaning and servicing
// may mix both; with no agent (the fake, ramdisk deploy interfaces) the
// core runs a manual clean or service made of them without booting one.

// hwStepWait and hwStepDeadline are what the steps' StepEnv waits with;
// tests shorten them.
var (
	hwStepWait     = driver.Sleep
	hwStepDeadline time.Duration
)

// driverSteps lists the out-of-band steps n's interfaces offer (mgmt is
// its management interface, nil when unresolved). None has a priority:
// they run when an operator asks for them. Steps that restart the machine
// say so (RebootRequested): in an agent's flow the core then waits for the
// agent to come back before the next step.
func driverSteps(n *proto.Node, mgmt driver.Management) []proto.Step {
	var out []proto.Step
	if _, err := driver.ResolveBIOS(n); err == nil {
		out = append(out,
			proto.Step{Interface: "bios", Step: "apply_configuration", RebootRequested: true, ArgsInfo: map[string]proto.ArgInfo{
				"settings": {Description: `A list of BIOS settings to apply, each {"name": …, "value": …}`, Required: true}}},
			proto.Step{Interface: "bios", Step: "factory_reset", RebootRequested: true},
		)
	}
	if _, err := driver.ResolveRAID(n); err == nil {
		out = append(out,
			proto.Step{Interface: "raid", Step: "create_configuration", ArgsInfo: map[string]proto.ArgInfo{
				"create_root_volume":     {Description: "Whether to create the root volume of target_raid_config (default true)"},
				"create_nonroot_volumes": {Description: "Whether to create the other volumes of target_raid_config (default true)"},
				"delete_existing":        {Description: "Whether to delete the existing volumes first (default false)"},
			}},
			proto.Step{Interface: "raid", Step: "delete_configuration"},
		)
	}
	if _, ok := mgmt.(driver.BMCResetter); ok {
		out = append(out, proto.Step{Interface: "management", Step: "reset_bmc"})
	}
	if _, err := driver.ResolveFirmware(n); err == nil {
		out = append(out, proto.Step{Interface: "firmware", Step: "update", RebootRequested: true, ArgsInfo: map[string]proto.ArgInfo{
			"settings": {Description: `A list of firmware images to apply, each {"component": …, "url": …}`, Required: true}}})
	}
	return out
}

// execDriverStep asks the node's interface to run s; an error fails the
// flow (the decision core names the step).
func (f *flow) execDriverStep(ctx context.Context, s proto.StepCall) error {
	env := driver.StepEnv{
		Reboot:   f.reboot,
		Wait:     hwStepWait,
		Deadline: hwStepDeadline,
	}
	switch s.Interface {
	case "bios":
		b, err := driver.ResolveBIOS(f.n)
		if err != nil {
			return err
		}
		switch s.Step.Step {
		case "apply_configuration":
			values, err := driver.BIOSStepArgs(s.Args)
			if err != nil {
				return err
			}
			err = b.Apply(ctx, f.n, values, env)
			f.cacheBIOS(ctx) // what stuck and what did not, either way
			return err
		case "factory_reset":
			err := b.FactoryReset(ctx, f.n, env)
			f.cacheBIOS(ctx)
			return err
		}
	case "firmware":
		fw, err := driver.ResolveFirmware(f.n)
		if err != nil {
			return err
		}
		updates, err := driver.FirmwareStepArgs(s.Args)
		if err != nil {
			return err
		}
		err = fw.Update(ctx, f.n, updates, env)
		flashed := map[string]bool{}
		for _, u := range updates {
			flashed[u.Component] = err == nil
		}
		f.cacheFirmware(ctx, flashed)
		return err
	case "management":
		if r, ok := f.ifs.Management.(driver.BMCResetter); ok && s.Step.Step == "reset_bmc" {
			return r.ResetBMC(ctx, f.n, env)
		}
	case "raid":
		r, err := driver.ResolveRAID(f.n)
		if err != nil {
			return err
		}
		return f.raidStep(ctx, r, s, env)
	}
	return fmt.Errorf("unknown out-of-band step %s.%s", s.Interface, s.Step.Step)
}

// reboot restarts the machine for a step. The running agent goes with it:
// its identity is wiped first, as for any power change, so the agent that
// boots looks up and gets a fresh token.
func (f *flow) reboot(ctx context.Context) error {
	if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) { s.WipeAgent() }); err != nil {
		return fatal{err}
	}
	return f.setPower(ctx, proto.PowerRebooting, 0)
}

// raidStep builds or deletes the node's logical disks and records what was
// built: raid_config, and the root volume's hints as properties.root_device
// (where the deploy then writes the image).
func (f *flow) raidStep(ctx context.Context, r driver.RAID, s proto.StepCall, env driver.StepEnv) error {
	var res driver.RAIDResult
	switch s.Step.Step {
	case "create_configuration":
		root, nonRoot, deleteFirst := true, true, false
		for name, p := range map[string]*bool{"create_root_volume": &root, "create_nonroot_volumes": &nonRoot, "delete_existing": &deleteFirst} {
			if v, ok := s.Args[name]; ok {
				b, isBool := v.(bool)
				if !isBool {
					return fmt.Errorf("argument %q must be a boolean, not %v", name, v)
				}
				*p = b
			}
		}
		if len(f.n.TargetRAIDConfig) == 0 {
			return fmt.Errorf("node %s has no target_raid_config", f.n.UUID)
		}
		disks, err := driver.ParseTargetRAID(f.n.TargetRAIDConfig, root, nonRoot)
		if err != nil {
			return err
		}
		if len(disks) == 0 {
			return errors.New("create_root_volume and create_nonroot_volumes leave no logical disk of target_raid_config to create")
		}
		if deleteFirst {
			if _, err := r.DeleteConfiguration(ctx, f.n, env); err != nil {
				return err
			}
		}
		res, err = r.CreateConfiguration(ctx, f.n, disks, env)
		if err != nil {
			return err
		}
	case "delete_configuration":
		var err error
		if res, err = r.DeleteConfiguration(ctx, f.n, env); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown out-of-band step %s.%s", s.Interface, s.Step.Step)
	}
	return f.update(ctx, func(n *proto.Node) {
		n.RAIDConfig = res.RAIDConfig
		if res.RootDevice != nil {
			if n.Properties == nil {
				n.Properties = proto.Dict{}
			}
			n.Properties["root_device"] = res.RootDevice
		}
	})
}

// hardwareStore returns the conductor's store of node hardware records.
func (c *Conductor) hardwareStore() (*store.NodeHardware, error) {
	c.hwOnce.Do(func() { c.hw, c.hwErr = store.NewNodeHardware(c.st) })
	return c.hw, c.hwErr
}

// cacheBIOS re-reads the node's BIOS settings into the store, as Ironic
// caches them after BIOS steps and cleaning. A node without a bios
// interface has nothing to cache; a failure is logged, not fatal.
func (f *flow) cacheBIOS(ctx context.Context) {
	b, err := driver.ResolveBIOS(f.n)
	if errors.Is(err, driver.ErrNoInterface) {
		return
	}
	hw, err := f.c.hardwareStore()
	if err != nil {
		f.c.log.Warn("cache BIOS settings", "node", f.n.UUID, "err", err)
		return
	}
	settings, err := b.Settings(ctx, f.n)
	if err == nil {
		err = hw.ReplaceBIOS(ctx, f.n.UUID, settings)
	}
	if err != nil {
		f.c.log.Warn("cache BIOS settings", "node", f.n.UUID, "err", err)
	}
}

// hwState is the Conductor's lazily opened hardware record store.
type hwState struct {
	hwOnce sync.Once
	hw     *store.NodeHardware
	hwErr  error
}

// cacheFirmware re-reads the node's firmware components into the store:
// initial_version is the first version ever seen, current_version the one
// read now, last_version_flashed the current one of each component just
// flashed (others keep theirs). Failures are logged, not fatal.
func (f *flow) cacheFirmware(ctx context.Context, flashed map[string]bool) {
	fw, err := driver.ResolveFirmware(f.n)
	if errors.Is(err, driver.ErrNoInterface) {
		return
	}
	hw, err := f.c.hardwareStore()
	if err != nil {
		f.c.log.Warn("cache firmware components", "node", f.n.UUID, "err", err)
		return
	}
	cur, err := fw.Components(ctx, f.n)
	if err != nil {
		f.c.log.Warn("cache firmware components", "node", f.n.UUID, "err", err)
		return
	}
	old, err := hw.ListFirmware(ctx, f.n.UUID)
	if err != nil {
		f.c.log.Warn("cache firmware components", "node", f.n.UUID, "err", err)
		return
	}
	byName := map[string]proto.FirmwareComponent{}
	for _, c := range old {
		byName[c.Component] = c
	}
	var out []proto.FirmwareComponent
	for _, c := range cur {
		v := c.Version
		rec, seen := byName[c.Component]
		if !seen {
			rec = proto.FirmwareComponent{Component: c.Component, InitialVersion: v}
		}
		rec.CurrentVersion = &v
		rec.Vendor, rec.Model, rec.SerialNumber = orNil(c.Vendor), orNil(c.Model), orNil(c.SerialNumber)
		if flashed[c.Component] {
			rec.LastVersionFlashed = &v
		}
		out = append(out, rec)
	}
	if err := hw.ReplaceFirmware(ctx, f.n.UUID, out); err != nil {
		f.c.log.Warn("cache firmware components", "node", f.n.UUID, "err", err)
	}
}

// orNil is s, or nil (JSON null) for "".
func orNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// setSecureBoot turns UEFI Secure Boot on (before the instance boots) or
// off (before cleaning) for a node whose capabilities ask for it, as
// Ironic's redfish boot interface does, and records it in secure_boot.
// Nodes that do not ask are left alone.
func (f *flow) setSecureBoot(ctx context.Context, on bool) error {
	if !driver.WantsSecureBoot(f.n) {
		return nil
	}
	sb, ok := f.ifs.Management.(driver.SecureBooter)
	if !ok {
		return fmt.Errorf("node %s asks for secure boot (capability secure_boot:true), which its management interface %s cannot set", f.n.UUID, f.n.ManagementInterface)
	}
	if err := sb.SetSecureBoot(ctx, f.n, on); err != nil {
		return fmt.Errorf("setting secure boot %v on node %s: %w", on, f.n.UUID, err)
	}
	return f.update(ctx, func(n *proto.Node) { n.SecureBoot = &on })
}
