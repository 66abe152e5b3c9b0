package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/kilnhq/kiln/controller/deploy"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// This file is the executor: it asks the decision core (package decide)
// what to do, does it — BMC, agent and store calls, under the node's
// reservation — and feeds what comes back to the core as the next event.

// maxDecisions bounds the decisions one pass over a node makes, as a safety
// net: a flow needs a handful (a request, then each answer it waits on).
const maxDecisions = 64

// act decides what the node needs now and does it, until nothing is left;
// the changes it decided are all stored when it returns (commit.go).
func (f *flow) act(ctx context.Context) error {
	for {
		err := f.decideAndDo(ctx)
		// A round that found nothing to act on ends the pass, whatever
		// the node says.
		f.mayGoOn = err == nil && f.acted && f.rounds < maxRounds && ctx.Err() == nil
		if cerr := f.finish(ctx); err == nil {
			err = cerr
		}
		if err != nil || !f.goOn {
			return err
		}
		f.goOn = false
		// The round answers an agent's heartbeat (see worker).
		ctx = store.Urgent(ctx)
		f.rounds++
		f.c.waits.rounds.Inc()
	}
}

// maxRounds bounds the rounds a pass adds for heartbeats that came while
// it held its node (commit.go), so that an agent answering at once does
// not keep a worker from the other queued nodes.
const maxRounds = 4

func (f *flow) decideAndDo(ctx context.Context) error {
	ifs, err := driver.Resolve(f.n)
	if err != nil {
		_, err := f.perform(ctx, decide.Step(f.input(ctx, flowstate.State{}), decide.DriverUnavailable{Err: err}))
		return err
	}
	f.ifs = ifs
	f.acted = false
	var ev decide.Event
	for range maxDecisions {
		fs, err := flowstate.Of(f.n)
		if err != nil {
			_, err := f.perform(ctx, decide.Step(f.input(ctx, fs), decide.BadState{Err: err}))
			return err
		}
		in := f.input(ctx, fs)
		if ev == nil {
			if ev = decide.Classify(in); ev == nil {
				f.idle = !f.touched
				return nil
			}
			f.touched, f.acted = true, true
			if _, ok := ev.(decide.OperatorRequest); ok {
				f.c.log.Info("starting flow", "node", f.n.UUID, "verb", fs.Request.Verb, "state", f.n.ProvisionState)
			}
		}
		if ev, err = f.perform(ctx, decide.Step(in, ev)); err != nil {
			return err
		}
	}
	f.c.log.Warn("node still has work after a full pass; it is looked at again next scan", "node", f.n.UUID, "state", f.n.ProvisionState)
	return nil
}

func (f *flow) input(ctx context.Context, fs flowstate.State) decide.Input {
	in := decide.Input{Node: f.n, State: fs, Deploy: f.ifs.Deploy, Now: time.Now(), Config: f.c.decideConfig()}
	in.DeploySteps, in.TemplateErr = f.deploySteps(ctx, fs.UserDeploySteps)
	in.DriverSteps = driverSteps(f.n, f.ifs.Management) // hwsteps.go
	return in
}

// fatal marks an error that ends the pass (the store failed, or the
// conductor is stopping) rather than an action's failure.
type fatal struct{ error }

// perform carries out acts in order. It returns the event the last action
// answered with, or ActionFailed for the first action that failed.
func (f *flow) perform(ctx context.Context, acts []decide.Action) (decide.Event, error) {
	for _, a := range acts {
		if !deferrable(a) {
			// What the node looks like is stored before anything the
			// world can see is done.
			if err := f.commit(ctx); err != nil {
				return nil, fatal{err}
			}
		}
		back := func() {}
		if waitsOutside(a) {
			back = placeOf(ctx).aside(ctx) // places.go
		}
		ev, err := f.do(ctx, a)
		back()
		if err == nil {
			if ev != nil {
				return ev, nil
			}
			continue
		}
		var fe fatal
		if errors.As(err, &fe) {
			return nil, fe.error
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // stopping: whoever runs next redoes it
		}
		if decide.ErrorRule(a).Ignore {
			f.c.log.Info("best-effort action failed", "node", f.n.UUID, "action", fmt.Sprintf("%T", a), "err", err)
			continue
		}
		return decide.ActionFailed{Action: a, Err: err}, nil
	}
	return nil, nil
}

// do carries out one action.
func (f *flow) do(ctx context.Context, a decide.Action) (decide.Event, error) {
	n := f.n
	switch a := a.(type) {
	case decide.Update:
		return nil, f.apply(ctx, a)
	case decide.History:
		f.history(ctx, a.Severity, a.Event)
	case decide.SetPower:
		return nil, f.setPower(ctx, a.Target, a.Timeout)
	case decide.SetBootDevice:
		return nil, f.ifs.Management.SetBootDevice(ctx, n, a.Device, a.Persistent)
	case decide.PrepareRamdisk:
		return nil, f.prepareRamdisk(ctx, a.KernelArgs)
	case decide.CleanUpRamdisk:
		return nil, f.ifs.Boot.CleanUpRamdisk(ctx, n)
	case decide.PrepareInstance:
		return nil, f.ifs.Boot.PrepareInstance(ctx, n)
	case decide.Validate:
		switch a.Interface {
		case "power":
			return nil, f.ifs.Power.Validate(ctx, n)
		case "boot":
			return nil, f.ifs.Boot.Validate(ctx, n)
		case "inspect":
			return nil, f.ifs.Inspect.Validate(ctx, n)
		}
		return nil, fmt.Errorf("no %s interface to validate", a.Interface)
	case decide.ReadPower:
		ps, err := f.ifs.Power.GetPowerState(ctx, n)
		if err != nil {
			return nil, err
		}
		return decide.PowerRead{State: ps}, nil
	case decide.Inspect:
		res, async, err := f.ifs.Inspect.Inspect(ctx, n)
		if err != nil {
			return nil, err
		}
		return decide.Inspected{Result: res, Async: async}, nil
	case decide.ReadInventory:
		raw, plugin, err := f.c.st.GetInventory(ctx, n.UUID)
		if err != nil {
			return nil, err
		}
		rules, err := f.c.storedRules(ctx)
		if err != nil {
			return nil, err
		}
		return decide.InventoryRead{Raw: raw, Plugin: plugin, Rules: rules}, nil
	case decide.CreatePorts:
		return nil, f.createPorts(ctx, a.MACs, a.PXE)
	case decide.EndAllocation:
		f.c.alloc.forget(ctx, &a.ID, n.UUID)
		return nil, nil
	case decide.StoreInventory:
		return nil, f.c.st.PutInventory(ctx, n.UUID, a.Raw, a.Plugin)
	case decide.FakeDeploy:
		return nil, driver.FakeDeploy(ctx, n)
	case decide.AgentGetSteps:
		if f.c.cfg.Agent == nil {
			return nil, nil
		}
		res, err := f.c.cfg.Agent.GetSteps(ctx, agentOf(n), a.Kind, nodeForAgent(n), f.portsNoErr(ctx))
		return decide.AgentStepsListed{Kind: a.Kind, Result: res, Err: err, HeartbeatAt: a.HeartbeatAt, Refresh: a.Refresh}, nil
	case decide.BuildImageArgs:
		args, err := imageArgs(n)
		if err != nil {
			return nil, err
		}
		return decide.ImageArgsBuilt{Listed: a.Listed, Args: args, HeartbeatAt: a.Listed.HeartbeatAt}, nil
	case decide.AgentCommands:
		if f.c.cfg.Agent == nil {
			return nil, nil
		}
		ag := agentOf(n)
		cmds, err := f.c.cfg.Agent.Commands(ctx, ag)
		if err != nil {
			f.c.log.Warn("read agent commands", "node", n.UUID, "agent", ag.URL, "err", err)
		}
		return decide.AgentCommandsRead{Kind: a.Kind, Commands: cmds, Err: err, HeartbeatAt: a.HeartbeatAt}, nil
	case decide.AgentExecute:
		sent := time.Now()
		_, err := f.c.cfg.Agent.ExecuteStep(ctx, agentOf(n), a.Kind, a.Step, nodeForAgent(n), f.portsNoErr(ctx), a.Versions)
		f.c.waits.command.Observe(time.Since(sent).Seconds())
		if !a.HeartbeatAt.IsZero() {
			d := time.Since(a.HeartbeatAt)
			f.c.lat.add(d)
			f.c.waits.hbCommand.Observe(d.Seconds())
		}
		return nil, err
	case decide.AgentPowerOff:
		if ag := agentOf(n); ag.URL != "" && f.c.cfg.Agent != nil {
			actx, cancel := context.WithTimeout(ctx, a.Timeout)
			defer cancel()
			return nil, f.c.cfg.Agent.PowerOff(actx, ag)
		}
	case decide.AgentPartitionUUIDs:
		uuids, err := f.c.cfg.Agent.GetPartitionUUIDs(ctx, agentOf(n))
		if err != nil {
			return nil, err
		}
		return nil, f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) { s.PartitionUUIDs = &uuids })
	case decide.AgentInstallBootloader:
		return nil, f.installBootloader(ctx, a) // bootloader.go
	case decide.AgentFinalizeRescue:
		return nil, f.c.cfg.Agent.FinalizeRescue(ctx, agentOf(n), a.Password, false)
	case decide.DriverStep:
		return nil, f.execDriverStep(ctx, a.Step) // hwsteps.go
	case decide.SetSecureBoot:
		return nil, f.setSecureBoot(ctx, a.On)
	case decide.RefreshHardware:
		f.cacheBIOS(ctx)
		f.cacheFirmware(ctx, nil)
	case decide.Wake:
		f.c.wakeAt(n.UUID, a.At)
	case decide.ManagementCall:
		if media, ok, err := f.virtualMediaCall(ctx, a.Request); ok {
			if ctx.Err() != nil {
				return nil, fatal{ctx.Err()}
			}
			return decide.ManagementAnswered{Request: a.Request, Media: media, Err: err}, nil
		}
		st, read, err := f.managementCall(ctx, a.Request)
		if ctx.Err() != nil {
			return nil, fatal{ctx.Err()} // stopping: the request stays for whoever runs next
		}
		if err != nil {
			f.c.log.Warn("boot device request failed", "node", n.UUID, "op", a.Request.Op, "err", err)
		}
		return decide.ManagementAnswered{Request: a.Request, Device: st, Read: read, Err: err}, nil
	default:
		return nil, fatal{fmt.Errorf("conductor: no executor for action %T", a)}
	}
	return nil, nil
}

// apply makes one decided change of the node, on the pass's copy at once
// and in the store with the next commit.
func (f *flow) apply(_ context.Context, u decide.Update) error {
	from := f.n.ProvisionState
	now := time.Now()
	// Apply leaves the node untouched when it refuses the move.
	if err := decide.Apply(f.n, u, now); err != nil && !u.Force {
		return fatal{fmt.Errorf("update node %s: %w", f.n.UUID, err)}
	}
	guardSecrets(f.n)
	f.pending = append(f.pending, pendingUpdate{u: u, at: now})
	n := f.n
	if u.Move == state.EvFail {
		msg := ""
		if n.LastError != nil {
			msg = *n.LastError
		}
		f.c.log.Warn("node flow failed", "node", n.UUID, "from", from, "to", n.ProvisionState, "error", msg)
	}
	return nil
}

// setPower drives the BMC and records the state it reached.
func (f *flow) setPower(ctx context.Context, target proto.PowerState, timeout time.Duration) error {
	if err := f.ifs.Power.SetPowerState(ctx, f.n, target, timeout); err != nil {
		return err
	}
	final := target
	switch target {
	case proto.PowerRebooting, proto.PowerSoftReboot:
		final = proto.PowerOn
	case proto.PowerSoftOff:
		final = proto.PowerOff
	}
	if err := f.update(ctx, func(n *proto.Node) { n.PowerState = &final; n.TargetPowerState = nil }); err != nil {
		return fatal{err}
	}
	return nil
}

// prepareRamdisk has the boot interface ready the agent. A virtual-media ISO
// carries its token: an agent booted from it cannot be told apart by MAC
// lookups on a shared network, so it gets a fresh token on its kernel
// command line (Ironic does the same), recorded before the ISO is built.
func (f *flow) prepareRamdisk(ctx context.Context, kernelArgs map[string]string) error {
	params := driver.RamdiskParams{KernelArgs: kernelArgs}
	if carrier, ok := f.ifs.Boot.(driver.AgentTokenCarrier); ok && carrier.CarriesAgentToken(f.n) {
		params.AgentToken = agentclient.NewToken()
		if err := f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) {
			s.Agent.Token, s.Agent.TokenPregenerated = params.AgentToken, true
		}); err != nil {
			return fatal{err}
		}
	}
	return f.ifs.Boot.PrepareRamdisk(ctx, f.n, params)
}

func (f *flow) portsNoErr(ctx context.Context) []*proto.Port {
	p, err := f.portsForAgent(ctx)
	if err != nil {
		f.c.log.Warn("list ports", "node", f.n.UUID, "err", err)
	}
	if p == nil {
		p = []*proto.Port{}
	}
	return p
}

// imageArgs are write_image's arguments for n: what to write and the
// rendered config drive.
func imageArgs(n *proto.Node) (*proto.PrepareImageParams, error) {
	info, err := deploy.ImageInfo(n)
	if err != nil {
		return nil, err
	}
	cd, err := configDriveFor(n)
	if err != nil {
		return nil, fmt.Errorf("building the config drive: %w", err)
	}
	args := &proto.PrepareImageParams{ImageInfo: info}
	if cd != "" {
		if args.Configdrive, err = json.Marshal(cd); err != nil {
			return nil, err
		}
	}
	return args, nil
}
