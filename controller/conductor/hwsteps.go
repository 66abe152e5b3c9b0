package conductor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Out-of-band steps: the clean and service steps of a node's hardware
// configuration interfaces (bios, raid, firmware), run here under the node's reservation
// rather than by the agent. They join the agent's steps when a flow is
// planned, so manual cleaning and servicing may mix both; with no agent
// (the fake, ramdisk deploy interfaces) a manual clean or service made of
// them runs without booting one.

// hwStepWait and hwStepDeadline are what the steps' StepEnv waits with;
// tests shorten them.
var (
	hwStepWait     = driver.Sleep
	hwStepDeadline time.Duration
)

// driverSteps lists the out-of-band steps n's interfaces offer. None has a
// priority: they run when an operator asks for them.
func driverSteps(n *proto.Node) []proto.Step {
	var out []proto.Step
	if _, err := driver.ResolveBIOS(n); err == nil {
		out = append(out,
			proto.Step{Interface: "bios", Step: "apply_configuration", ArgsInfo: map[string]proto.ArgInfo{
				"settings": {Description: `A list of BIOS settings to apply, each {"name": …, "value": …}`, Required: true}}},
			proto.Step{Interface: "bios", Step: "factory_reset"},
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
	if ifs, err := driver.Resolve(n); err == nil {
		if _, ok := ifs.Management.(driver.BMCResetter); ok {
			out = append(out, proto.Step{Interface: "management", Step: "reset_bmc"})
		}
	}
	if _, err := driver.ResolveFirmware(n); err == nil {
		out = append(out, proto.Step{Interface: "firmware", Step: "update", ArgsInfo: map[string]proto.ArgInfo{
			"settings": {Description: `A list of firmware images to apply, each {"component": …, "url": …}`, Required: true}}})
	}
	return out
}

// isDriverStep reports whether s is one of driverSteps(n).
func isDriverStep(n *proto.Node, s proto.StepCall) bool {
	for _, d := range driverSteps(n) {
		if d.Interface == s.Interface && d.Step == s.Step.Step {
			return true
		}
	}
	return false
}

// hasDriverStep reports whether any of steps is an out-of-band step of n.
func hasDriverStep(n *proto.Node, steps []proto.StepCall) bool {
	for _, s := range steps {
		if isDriverStep(n, s) {
			return true
		}
	}
	return false
}

// runOutOfBand plans and runs a manual clean or a service made of
// out-of-band steps on a node without an agent.
func (f *flow) runOutOfBand(ctx context.Context, kind proto.StepKind, requested []proto.StepCall) error {
	plan, err := buildCleanSteps(driverSteps(f.n), requested, true)
	if err != nil {
		return f.fail(ctx, fmt.Sprintf("Node %s: %v", f.n.UUID, err))
	}
	if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) {
		s.ResetPlan()
		s.Steps, s.StepIndex, s.StepSent = plan, 0, false
	}); err != nil {
		return err
	}
	return f.runSteps(ctx, kind, time.Time{})
}

// driverStep runs the out-of-band step cur of a flow of kind. stop tells
// runSteps to return: the step failed (the node is failed), or an agent
// runs the flow and its next heartbeat, after the reboot the step caused,
// continues it.
func (f *flow) driverStep(ctx context.Context, kind proto.StepKind, cur proto.StepCall) (stop bool, err error) {
	work := map[proto.StepKind]proto.ProvisionState{
		proto.StepClean: proto.StateCleaning, proto.StepDeploy: proto.StateDeploying, proto.StepService: proto.StateServicing,
	}[kind]
	if f.n.ProvisionState != work {
		if err := f.transition(ctx, state.EvResume, nil); err != nil {
			return true, err
		}
	}
	if err := f.update(ctx, func(n *proto.Node) {
		switch kind {
		case proto.StepClean:
			n.CleanStep = stepDict(cur)
		case proto.StepDeploy:
			n.DeployStep = stepDict(cur)
		case proto.StepService:
			n.ServiceStep = stepDict(cur)
		}
	}); err != nil {
		return true, err
	}
	if err := f.execDriverStep(ctx, cur); err != nil {
		return true, f.fail(ctx, fmt.Sprintf("Node %s failed step %s: %v", f.n.UUID, stepLabel(cur), err))
	}
	fs, _ := flowstate.Of(f.n)
	next := fs.StepIndex + 1
	if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) { s.StepIndex, s.StepSent = next, false }); err != nil {
		return true, err
	}
	if f.usesAgent() && next < len(fs.Steps) {
		// The step rebooted the machine: the agent comes back, looks up
		// and heartbeats, and that heartbeat runs the next step.
		return true, f.transition(ctx, state.EvWait, nil)
	}
	return false, nil
}

// execDriverStep asks the node's interface to run s.
func (f *flow) execDriverStep(ctx context.Context, s proto.StepCall) error {
	env := driver.StepEnv{
		Reboot:   func(ctx context.Context) error { return f.setPower(ctx, proto.PowerRebooting, 0) },
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
	return fmt.Errorf("unknown out-of-band step %s", stepLabel(s))
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
		return fmt.Errorf("unknown out-of-band step %s", stepLabel(s))
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

// refreshAgentSteps asks an agent that booted in the middle of a flow (an
// out-of-band step rebooted the machine, and the power change forgot the
// agent) for its steps again, so the next step goes out with its hardware
// managers' versions; the plan stays. Ironic refreshes them the same way
// after a step's reboot.
func (f *flow) refreshAgentSteps(ctx context.Context, kind proto.StepKind) error {
	n := f.n
	res, err := f.c.cfg.Agent.GetSteps(ctx, agentOf(n), kind, nodeForAgent(n), f.portsNoErr(ctx))
	if err != nil {
		return f.fail(ctx, fmt.Sprintf("Node %s: getting %s steps from the agent at %s after a reboot failed: %v", n.UUID, kind, agentOf(n).URL, err))
	}
	return f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) {
		s.SetCachedSteps(kind, res.Steps)
		s.CachedStepsVersions = res.HardwareManagerVersion
	})
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
		if flashed[c.Component] {
			rec.LastVersionFlashed = &v
		}
		out = append(out, rec)
	}
	if err := hw.ReplaceFirmware(ctx, f.n.UUID, out); err != nil {
		f.c.log.Warn("cache firmware components", "node", f.n.UUID, "err", err)
	}
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
