package conductor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// waitStates are where a node waits for its agent.
var waitStates = map[proto.ProvisionState]bool{
	proto.StateCleanWait: true, proto.StateDeployWait: true, proto.StateInspectWait: true,
	proto.StateRescueWait: true, proto.StateServiceWait: true,
}

// hasWork reports whether n carries something for its conductor to do.
func hasWork(n *proto.Node) bool {
	fs, _ := flowstate.Read(n, flowstate.PartWork)
	if fs.Request != nil || fs.BootDevicePending || !fs.HeartbeatPending.IsZero() || fs.InspectionPending || fs.ManagementRequest != nil {
		return true
	}
	if n.TargetPowerState != nil {
		return true
	}
	// A flow interrupted between steps (a conductor died) resumes.
	return state.IsTransient(n.ProvisionState) && !waitStates[n.ProvisionState]
}

// waitExpired reports whether n has waited for its agent too long: no first
// heartbeat within CallbackTimeout, or a running agent silent for longer than
// the heartbeat timeout it was given.
func (c *Conductor) waitExpired(n *proto.Node, now time.Time) bool {
	return c.waitTimeoutReason(n, now) != ""
}

func (c *Conductor) waitTimeoutReason(n *proto.Node, now time.Time) string {
	if !waitStates[n.ProvisionState] || n.Maintenance {
		return ""
	}
	fs, _ := flowstate.Read(n, flowstate.PartAgent)
	if last := fs.Agent.LastHeartbeat; !last.IsZero() {
		if now.Sub(last) > c.cfg.AgentHeartbeatTimeout {
			return fmt.Sprintf("The agent on node %s stopped heartbeating: last heartbeat %s ago, more than the %s heartbeat timeout, while the node was in %s",
				n.UUID, now.Sub(last).Round(time.Second), c.cfg.AgentHeartbeatTimeout, n.ProvisionState)
		}
		return ""
	}
	if n.ProvisionUpdatedAt != nil && now.Sub(n.ProvisionUpdatedAt.Time) > c.cfg.CallbackTimeout {
		return fmt.Sprintf("Timeout reached while waiting for callback for node %s: no agent heartbeat within %s in %s",
			n.UUID, c.cfg.CallbackTimeout, n.ProvisionState)
	}
	return ""
}

// process takes node uuid's reservation, does what it needs, and releases it.
func (c *Conductor) process(ctx context.Context, uuid string) {
	n, err := c.st.Reserve(ctx, uuid, c.cfg.Name)
	if err != nil {
		if !errors.Is(err, store.ErrLocked) && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			c.log.Warn("reserve node", "node", uuid, "err", err)
		}
		return
	}
	defer func() {
		// Release even when ctx is done: a held reservation blocks the node.
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.st.Release(rctx, uuid, c.cfg.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			c.log.Warn("release node", "node", uuid, "err", err)
		}
		// Work that arrived while we held the node (a heartbeat) goes next.
		if fresh, err := c.st.GetNode(rctx, uuid); err == nil && fresh.Reservation == nil && hasWork(fresh) && ctx.Err() == nil {
			c.Notify(uuid)
		}
	}()
	if !c.ownsNode(n) {
		return
	}
	f := &flow{c: c, n: n}
	if n.Conductor == nil || *n.Conductor != c.cfg.Name {
		// The node's conductor field names who manages it now.
		if err := f.update(ctx, func(n *proto.Node) { name := c.cfg.Name; n.Conductor = &name }); err != nil {
			c.log.Warn("record conductor", "node", uuid, "err", err)
			return
		}
	}
	if err := f.act(ctx); err != nil && ctx.Err() == nil {
		c.log.Error("act on node", "node", uuid, "state", n.ProvisionState, "err", err)
	}
}

// flow is one reserved pass over one node.
type flow struct {
	c   *Conductor
	n   *proto.Node
	ifs driver.Set
}

// update applies fn to the stored node (read-modify-write, so fields the API
// changed meanwhile, such as a heartbeat, survive) and keeps the result.
func (f *flow) update(ctx context.Context, fn func(n *proto.Node)) error {
	n, err := f.c.st.UpdateNode(ctx, f.n.UUID, func(n *proto.Node) error {
		if n.DriverInternalInfo == nil {
			n.DriverInternalInfo = proto.Dict{}
		}
		fn(n)
		guardSecrets(n)
		return nil
	})
	if err != nil {
		return fmt.Errorf("update node %s: %w", f.n.UUID, err)
	}
	f.n = n
	return nil
}

// updateFlow is update for changes of the node's flow state.
func (f *flow) updateFlow(ctx context.Context, fn func(n *proto.Node, s *flowstate.State)) error {
	return f.update(ctx, func(n *proto.Node) {
		flowstate.Update(n, func(s *flowstate.State) { fn(n, s) })
	})
}

// move takes the state-machine arrow ev inside fn's update.
func move(n *proto.Node, ev state.Event) error {
	sn := state.Node{State: n.ProvisionState, Maintenance: n.Maintenance, Protected: n.Protected, Retired: n.Retired}
	if n.TargetProvisionState != nil {
		sn.Target = *n.TargetProvisionState
	}
	t, err := state.Next(sn, ev)
	if err != nil {
		return err
	}
	n.ProvisionState = t.To
	n.TargetProvisionState = nil
	if t.Target != proto.NoState {
		target := t.Target
		n.TargetProvisionState = &target
	}
	n.ProvisionUpdatedAt = proto.Now()
	return nil
}

// transition moves the node along ev, with extra changes in fn.
func (f *flow) transition(ctx context.Context, ev state.Event, fn func(n *proto.Node)) error {
	var moveErr error
	err := f.update(ctx, func(n *proto.Node) {
		if moveErr = move(n, ev); moveErr != nil {
			return
		}
		if fn != nil {
			fn(n)
		}
	})
	if moveErr != nil {
		return fmt.Errorf("node %s: %w", f.n.UUID, moveErr)
	}
	return err
}

// fail ends the running flow in its failed state with last_error = msg and
// records the failure in the node's history.
func (f *flow) fail(ctx context.Context, msg string) error {
	from := f.n.ProvisionState
	err := f.transition(ctx, state.EvFail, func(n *proto.Node) {
		n.LastError = &msg
		clearFlow(n)
		flowstate.Update(n, func(s *flowstate.State) { s.Agent.TokenPregenerated = false })
	})
	if err != nil {
		// The state cannot fail from here; keep the error visible anyway.
		_ = f.update(ctx, func(n *proto.Node) { n.LastError = &msg; clearFlow(n) })
	}
	f.c.log.Warn("node flow failed", "node", f.n.UUID, "from", from, "to", f.n.ProvisionState, "error", msg)
	f.history(ctx, "ERROR", msg)
	return nil
}

// clearFlow removes the running flow's bookkeeping.
func clearFlow(n *proto.Node) {
	flowstate.Update(n, (*flowstate.State).ClearFlow)
	n.CleanStep = proto.Dict{}
	n.DeployStep = proto.Dict{}
}

func (f *flow) history(ctx context.Context, severity, event string) {
	err := f.c.st.AddHistory(ctx, f.n.UUID, proto.HistoryEvent{Severity: severity, Event: secrets.Scrub(event), EventType: "conductor", Conductor: f.c.cfg.Name})
	if err != nil {
		f.c.log.Warn("record history", "node", f.n.UUID, "err", err)
	}
}

// act decides what the node needs now and does it.
func (f *flow) act(ctx context.Context) error {
	n := f.n
	ifs, err := driver.Resolve(n)
	if err != nil {
		if state.IsTransient(n.ProvisionState) {
			return f.fail(ctx, fmt.Sprintf("Node %s: %v", n.UUID, err))
		}
		return f.update(ctx, func(n *proto.Node) {
			msg := err.Error()
			n.LastError = &msg
			n.TargetPowerState = nil
			flowstate.Update(n, func(s *flowstate.State) {
				s.Request, s.BootDevicePending = nil, false
				failManagementRequest(s, msg)
			})
		})
	}
	f.ifs = ifs
	fs, err := flowstate.Of(n)
	if err != nil {
		return f.fail(ctx, fmt.Sprintf("Node %s: unreadable flow state: %v", n.UUID, err))
	}
	if fs.Request != nil {
		return f.startFlow(ctx, *fs.Request)
	}
	if reason := f.c.waitTimeoutReason(n, time.Now()); reason != "" {
		return f.fail(ctx, reason)
	}
	switch n.ProvisionState {
	case proto.StateCleanWait:
		if !fs.HeartbeatPending.IsZero() {
			return f.continueSteps(ctx, proto.StepClean)
		}
	case proto.StateDeployWait:
		if !fs.HeartbeatPending.IsZero() {
			return f.continueSteps(ctx, proto.StepDeploy)
		}
	case proto.StateServiceWait:
		if !fs.HeartbeatPending.IsZero() {
			return f.continueSteps(ctx, proto.StepService)
		}
	case proto.StateRescueWait:
		if !fs.HeartbeatPending.IsZero() {
			return f.finishRescue(ctx)
		}
	case proto.StateInspectWait:
		if fs.InspectionPending {
			return f.finishInspection(ctx)
		}
		if !fs.HeartbeatPending.IsZero() {
			return f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) { s.HeartbeatPending = time.Time{} })
		}
	case proto.StateCleaning:
		if fs.Steps != nil {
			return f.runSteps(ctx, proto.StepClean, time.Time{})
		}
		return f.fail(ctx, fmt.Sprintf("Kiln conductor restarted while node %s was cleaning; cleaning was interrupted", n.UUID))
	case proto.StateDeploying:
		if fs.Steps != nil {
			return f.runSteps(ctx, proto.StepDeploy, time.Time{})
		}
		return f.fail(ctx, fmt.Sprintf("Kiln conductor restarted while node %s was deploying; the deployment was interrupted", n.UUID))
	case proto.StateServicing:
		if fs.Steps != nil {
			return f.runSteps(ctx, proto.StepService, time.Time{})
		}
		return f.fail(ctx, fmt.Sprintf("Kiln conductor restarted while node %s was servicing; servicing was interrupted", n.UUID))
	default:
		if state.IsTransient(n.ProvisionState) && !waitStates[n.ProvisionState] {
			return f.fail(ctx, fmt.Sprintf("Kiln conductor restarted while node %s was in %s; the operation was interrupted", n.UUID, n.ProvisionState))
		}
	}
	if fs.ManagementRequest != nil {
		// A client waits for this answer: it goes before a power change.
		if err := f.runManagementRequest(ctx); err != nil {
			return err
		}
	}
	if f.n.TargetPowerState != nil {
		return f.changePower(ctx)
	}
	if fs.BootDevicePending {
		return f.applyBootDevice(ctx)
	}
	return nil
}

// startFlow carries out the provision request the API recorded: the API has
// already moved the node into the verb's first state.
func (f *flow) startFlow(ctx context.Context, req flowstate.Request) error {
	n := f.n
	verb := req.Verb
	f.c.log.Info("starting flow", "node", n.UUID, "verb", verb, "state", n.ProvisionState)
	switch n.ProvisionState {
	case proto.StateVerifying:
		return f.verify(ctx)
	case proto.StateCleaning:
		return f.startCleaning(ctx, req)
	case proto.StateInspecting:
		return f.startInspection(ctx)
	case proto.StateDeploying:
		return f.startDeploy(ctx, req)
	case proto.StateDeleting:
		return f.startDelete(ctx)
	case proto.StateAdopting:
		return f.adopt(ctx)
	case proto.StateRescuing:
		return f.startRescue(ctx)
	case proto.StateUnrescuing:
		return f.unrescue(ctx)
	case proto.StateServicing:
		return f.startService(ctx, req)
	case proto.StateCleanFailed, proto.StateDeployFailed, proto.StateInspectFailed, proto.StateRescueFailed, proto.StateServiceFailed:
		if verb == string(proto.VerbAbort) {
			return f.abortCleanup(ctx)
		}
	}
	// Verbs that only move the node between stable states need no action.
	return f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) { s.Request = nil })
}

// verify checks the power credentials: enroll → verifying → manageable.
func (f *flow) verify(ctx context.Context) error {
	n := f.n
	if err := f.ifs.Power.Validate(ctx, n); err != nil {
		f.recordBMCCheck(ctx, "verify", err)
		return f.fail(ctx, fmt.Sprintf("Failed to validate power driver interface for node %s. Error: %v", n.UUID, err))
	}
	ps, err := f.ifs.Power.GetPowerState(ctx, n)
	if err != nil {
		f.recordBMCCheck(ctx, "verify", err)
		return f.fail(ctx, fmt.Sprintf("Failed to get power state for node %s. Error: %v", n.UUID, err))
	}
	return f.transition(ctx, state.EvDone, func(n *proto.Node) {
		n.PowerState = &ps
		flowstate.Update(n, func(s *flowstate.State) {
			s.LastBMCCheck = &proto.BMCCheck{At: time.Now(), Operation: "verify"}
			s.Request = nil
		})
	})
}

// adopt takes an already-deployed machine under management.
func (f *flow) adopt(ctx context.Context) error {
	n := f.n
	for _, v := range []func(context.Context, *proto.Node) error{f.ifs.Power.Validate, f.ifs.Boot.Validate} {
		if err := v(ctx, n); err != nil {
			return f.fail(ctx, fmt.Sprintf("Error while attempting to adopt node %s: %v", n.UUID, err))
		}
	}
	ps, err := f.ifs.Power.GetPowerState(ctx, n)
	if err != nil {
		return f.fail(ctx, fmt.Sprintf("Error while attempting to adopt node %s: %v", n.UUID, err))
	}
	return f.transition(ctx, state.EvDone, func(n *proto.Node) {
		n.PowerState = &ps
		flowstate.Update(n, func(s *flowstate.State) { s.Request = nil })
	})
}

// setPower drives the BMC and records the result. A power change ends the
// running agent, so its identity is wiped first: the next agent must look up
// and get a fresh token, and nothing it did before can be mistaken for it.
func (f *flow) setPower(ctx context.Context, target proto.PowerState, timeout time.Duration) error {
	if err := f.update(ctx, wipeAgent); err != nil {
		return err
	}
	if err := f.ifs.Power.SetPowerState(ctx, f.n, target, timeout); err != nil {
		return fmt.Errorf("Failed to change power state to '%s' for node %s. Error: %v", target, f.n.UUID, err)
	}
	final := target
	switch target {
	case proto.PowerRebooting, proto.PowerSoftReboot:
		final = proto.PowerOn
	case proto.PowerSoftOff:
		final = proto.PowerOff
	}
	return f.update(ctx, func(n *proto.Node) {
		n.PowerState = &final
		n.TargetPowerState = nil
	})
}

// forgetAgent ends an agent's life at the end of a flow: unlike wipeAgent
// it also drops a pre-generated token.
func forgetAgent(n *proto.Node) {
	flowstate.Update(n, (*flowstate.State).ForgetAgent)
}

// wipeAgent forgets the running agent, as Ironic does on power changes:
// the next agent must look up and get a fresh token.
func wipeAgent(n *proto.Node) {
	flowstate.Update(n, (*flowstate.State).WipeAgent)
}

// changePower carries out PUT .../states/power.
func (f *flow) changePower(ctx context.Context) error {
	target := *f.n.TargetPowerState
	fs, _ := flowstate.Of(f.n)
	timeout := time.Duration(fs.PowerTimeout) * time.Second
	if err := f.setPower(ctx, target, timeout); err != nil {
		msg := err.Error()
		f.history(ctx, "ERROR", msg)
		return f.update(ctx, func(n *proto.Node) {
			n.LastError = &msg
			n.TargetPowerState = nil
			flowstate.Update(n, func(s *flowstate.State) { s.PowerTimeout = 0 })
		})
	}
	return f.update(ctx, func(n *proto.Node) {
		n.LastError = nil
		flowstate.Update(n, func(s *flowstate.State) { s.PowerTimeout = 0 })
	})
}

// applyBootDevice carries out PUT .../management/boot_device.
func (f *flow) applyBootDevice(ctx context.Context) error {
	fs, _ := flowstate.Of(f.n)
	var dev string
	var persistent bool
	if fs.BootDevice != nil {
		dev, persistent = fs.BootDevice.Device, fs.BootDevice.Persistent
	}
	err := f.ifs.Management.SetBootDevice(ctx, f.n, dev, persistent)
	return f.update(ctx, func(n *proto.Node) {
		flowstate.Update(n, func(s *flowstate.State) { s.BootDevicePending = false })
		if err != nil {
			msg := fmt.Sprintf("Failed to set boot device %s for node %s. Error: %v", dev, n.UUID, err)
			n.LastError = &msg
		}
	})
}

// latencies keeps heartbeat → next command delays for reporting.
type latencies struct {
	mu      sync.Mutex
	samples []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) < 100000 {
		l.samples = append(l.samples, d)
	}
}

// HeartbeatLatency returns the median and 99th percentile of the time from an
// agent heartbeat reaching the API to the conductor sending the next command.
func (c *Conductor) HeartbeatLatency() (p50, p99 time.Duration, n int) {
	c.lat.mu.Lock()
	s := append([]time.Duration(nil), c.lat.samples...)
	c.lat.mu.Unlock()
	if len(s) == 0 {
		return 0, 0, 0
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[(len(s)*99)/100], len(s)
}
