package conductor

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// queuedNow is how many entries wait in both lanes.
func queuedNow(c *Conductor) int { return len(c.agents) + len(c.queue) }

// A node a worker is acting on is not handed to a second worker: the
// requests that come meanwhile are noted, and the node is queued once,
// in the fastest lane asked for, when the first worker is done.
func TestABusyNodeIsQueuedAgainWhenItsPassEnds(t *testing.T) {
	ctx := context.Background()
	c := New(Config{Name: "c1"})
	c.Notify("node-a")
	c.Notify("node-b")
	if u, _, ok := c.next(ctx); !ok || u != "node-a" {
		t.Fatalf("next = %q, %v; want node-a", u, ok)
	}
	// While node-a's pass runs: its request, then its agent's heartbeat.
	c.Notify("node-a")
	c.NotifyAgent("node-a")
	c.Notify("node-a")
	if n := queuedNow(c); n != 1 {
		t.Fatalf("%d entries queued during node-a's pass, want node-b's alone", n)
	}
	c.done("node-a")
	if got := drain(c); len(got) != 2 || got[0] != "node-a" || got[1] != "node-b" {
		t.Fatalf("taken %v after node-a's pass; want node-a (agent lane) then node-b", got)
	}
	// A pass nobody asked for again queues nothing.
	c.Notify("node-c")
	if u, _, _ := c.next(ctx); u != "node-c" {
		t.Fatalf("next = %q, want node-c", u)
	}
	c.done("node-c")
	if n := queuedNow(c); n != 0 {
		t.Errorf("%d entries queued after a pass nobody asked for again, want 0", n)
	}
}

// notifyingAgent is stepAgent whose heartbeat, recorded while the node is
// held, wakes the conductor as the API does; it notes whether another
// worker could then have taken the node.
type notifyingAgent struct {
	*stepAgent
	c *Conductor
	// queuedDuringPass is how many entries waited in the lanes right
	// after the wake-up.
	queuedDuringPass int
}

func (a *notifyingAgent) ExecuteStep(ctx context.Context, ag agentclient.Agent, kind proto.StepKind, step proto.StepCall, node, ports any, v map[string]string) (proto.CommandResult, error) {
	res, err := a.stepAgent.ExecuteStep(ctx, ag, kind, step, node, ports, v)
	a.c.NotifyAgent(a.uuid)
	a.queuedDuringPass = queuedNow(a.c)
	return res, err
}

// cleanWaitNode stores a node in clean wait whose agent has finished the
// first of steps (the step index at 0, sent) and heartbeated.
func cleanWaitNode(t *testing.T, st store.Store, uuid string, steps []proto.StepCall, beat time.Time) {
	t.Helper()
	target := proto.StateAvailable
	name := "c1"
	n := &proto.Node{UUID: uuid, Driver: "fake-hardware", ProvisionState: proto.StateCleanWait, Conductor: &name,
		PowerInterface: "fake", ManagementInterface: "fake", BootInterface: "fake", InspectInterface: "fake", DeployInterface: "direct",
		TargetProvisionState: &target, CleanStep: proto.Dict{"interface": "deploy", "step": steps[0].Step.Step},
		DriverInternalInfo: proto.Dict{
			proto.InfoAgentURL: "http://192.0.2.1:9999", proto.InfoSteps: steps,
			proto.InfoStepIndex: 0, proto.InfoStepSent: true, proto.InfoHeartbeatPending: beat.Format(time.RFC3339Nano),
		}}
	if err := st.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// The heartbeat an agent sends as soon as the step just handed to it is
// done reaches the conductor while the pass that sent the step still
// holds the node. It costs no reservation attempt doomed to fail, nor a
// second pass: the pass that holds the node answers it.
func TestAHeartbeatDuringThePassCostsNoFailedReservation(t *testing.T) {
	ctx := context.Background()
	st := openCountingStore(t)
	base := st.Store
	steps := twoCleanSteps()
	uuid := "6a1d3f0e-2b4c-4d5e-8f60-7a8b9c0d1e2f"
	first := time.Now().UTC().Add(-time.Second)
	cleanWaitNode(t, base, uuid, steps, first)
	done, _ := json.Marshal(proto.ExecuteStepResult{Kind: proto.StepClean, Step: steps[0]})
	inner := &stepAgent{st: base, uuid: uuid, beat: first.Add(time.Second)}
	inner.cmds = []proto.CommandResult{
		{CommandName: "get_clean_steps", CommandStatus: proto.CommandSucceeded},
		{CommandName: "execute_clean_step", CommandStatus: proto.CommandSucceeded, CommandResult: done},
	}
	agent := &notifyingAgent{stepAgent: inner}
	c := New(Config{Store: st, Agent: agent, Name: "c1"})
	agent.c = c

	c.NotifyAgent(uuid)
	u, _, ok := c.next(ctx)
	if !ok || u != uuid {
		t.Fatalf("next = %q, %v; want the node", u, ok)
	}
	c.process(ctx, u)
	c.done(u)

	if inner.err != nil {
		t.Fatal(inner.err)
	}
	if len(inner.executed) != 1 || inner.executed[0] != "erase_devices" {
		t.Fatalf("steps sent %v, want [erase_devices]", inner.executed)
	}
	if agent.queuedDuringPass != 0 {
		t.Errorf("%d entries queued while the pass held the node: a second worker would have tried to reserve it", agent.queuedDuringPass)
	}
	if r := st.reserves.Load(); r != 1 {
		t.Errorf("%d reservations, want 1", r)
	}
	c.mu.Lock()
	lane, waiting := c.queued[uuid], len(c.agents)
	c.mu.Unlock()
	if lane != laneNone || waiting != 0 {
		t.Errorf("after the pass: node in lane %d, %d agent entries; want it not queued (the pass answered the heartbeat)", lane, waiting)
	}
	if r := testutil.ToFloat64(c.waits.rounds); r != 1 {
		t.Errorf("%v rounds added, want 1", r)
	}
}

// endingAgent is stubAgent that also powers the machine off, as the
// agent does when a clean ends.
type endingAgent struct{ stubAgent }

func (*endingAgent) PowerOff(context.Context, agentclient.Agent) error { return nil }

// A pass that ends the node's wait for its agent cancels the wake the
// wait had scheduled; a pass that leaves the node waiting keeps one.
func TestAPassThatEndsTheWaitCancelsItsWake(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	steps := []proto.StepCall{{Step: proto.Step{Step: "erase_devices_metadata", Interface: "deploy", Priority: 99}}}
	done, _ := json.Marshal(proto.ExecuteStepResult{Kind: proto.StepClean, Step: steps[0]})
	agent := &endingAgent{stubAgent{cmds: []proto.CommandResult{
		{CommandName: "get_clean_steps", CommandStatus: proto.CommandSucceeded},
		{CommandName: "execute_clean_step", CommandStatus: proto.CommandSucceeded, CommandResult: done},
	}}}
	c := New(Config{Store: st, Agent: agent, Name: "c1"})
	defer c.stopWakes()

	// The last step is done: the pass ends the clean.
	last := "1e2d3c4b-5a69-4788-9a0b-1c2d3e4f5a6b"
	cleanWaitNode(t, st, last, steps, time.Now().UTC())
	c.wakeAt(last, time.Now().Add(time.Hour)) // as the wait's last heartbeat scheduled
	c.process(ctx, last)
	n, err := st.GetNode(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	if n.ProvisionState != proto.StateAvailable || n.Reservation != nil {
		t.Fatalf("node %s, reservation %v; want available, released", n.ProvisionState, n.Reservation)
	}
	if w := c.pendingWakes(); w != 0 {
		t.Errorf("%d wakes pending after the clean ended, want 0", w)
	}

	// The step still runs: the node keeps waiting, with its wake.
	agent.cmds[1].CommandStatus = proto.CommandRunning
	waiting := "2f3e4d5c-6b7a-4899-8a1b-2c3d4e5f6a7b"
	cleanWaitNode(t, st, waiting, steps, time.Now().UTC())
	c.process(ctx, waiting)
	if n, err = st.GetNode(ctx, waiting); err != nil {
		t.Fatal(err)
	}
	if n.ProvisionState != proto.StateCleanWait {
		t.Fatalf("node %s, want clean wait", n.ProvisionState)
	}
	if w := c.pendingWakes(); w != 1 {
		t.Errorf("%d wakes pending for the waiting node, want 1", w)
	}
	if fs, _ := flowstate.Of(n); !fs.HeartbeatPending.IsZero() {
		t.Errorf("heartbeat still pending after the pass: %v", fs.HeartbeatPending)
	}
}

// A scan's finding is dropped when it is stale: the node is held by a
// worker, or a worker finished with it after the scan read the store.
// Others are queued, and pass ends older than the scan are forgotten.
func TestAScanSkipsNodesPassedSinceItRead(t *testing.T) {
	ctx := context.Background()
	c := New(Config{Name: "c1"})
	before := time.Now().Add(-time.Millisecond) // when the scan began reading
	c.Notify("passed")
	if u, _, _ := c.next(ctx); u != "passed" {
		t.Fatalf("next = %q, want passed", u)
	}
	c.done("passed") // ended after the scan began reading
	c.Notify("held")
	if u, _, _ := c.next(ctx); u != "held" {
		t.Fatalf("next = %q, want held", u)
	}
	for _, u := range []string{"passed", "held", "fresh"} {
		c.foundByScan(u, before)
	}
	if got := drain(c); len(got) != 1 || got[0] != "fresh" {
		t.Fatalf("the scan queued %v, want [fresh]", got)
	}
	c.done("held")
	if n := queuedNow(c); n != 0 {
		t.Errorf("%d entries queued after the held node's pass, want 0 (the scan's finding was dropped)", n)
	}
	// A later scan, begun after both passes, queues them again.
	c.forgetPassesBefore(time.Now().Add(time.Second))
	c.mu.Lock()
	kept := len(c.passEnded)
	c.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d pass ends kept after a later scan began, want 0", kept)
	}
	c.foundByScan("passed", time.Now())
	if got := drain(c); len(got) != 1 || got[0] != "passed" {
		t.Errorf("a later scan queued %v, want [passed]", got)
	}
}

// A request made while a worker holds the node, for work its pass then
// finds and does (the API wrote it before the pass's last write read the
// node), does not bring the node back for a pass with nothing to do; a
// request made after that read does.
func TestARequestThePassConsumedQueuesNothingMore(t *testing.T) {
	ctx := context.Background()
	c, st := testConductor(t, Config{})
	uuid := addNodes(t, st, testHW, 1, func(int) string { return "" })[0]
	if _, err := st.UpdateNode(ctx, uuid, func(n *proto.Node) error { n.TargetPowerState = ptr(proto.PowerOn); return nil }); err != nil {
		t.Fatal(err)
	}
	c.Notify(uuid)
	if u, _, _ := c.next(ctx); u != uuid {
		t.Fatalf("next = %q, want the node", u)
	}
	c.Notify(uuid) // the API's wake-up for the power request, the node held
	c.process(ctx, uuid)
	n, err := st.GetNode(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	if n.TargetPowerState != nil || n.PowerState == nil || *n.PowerState != proto.PowerOn {
		t.Fatalf("power %v, target %v; want the request done (on, no target)", n.PowerState, n.TargetPowerState)
	}
	c.done(uuid)
	if q := queuedNow(c); q != 0 {
		t.Errorf("%d entries queued after a pass that did the work it was woken for, want 0", q)
	}

	// Work recorded after the pass's last read: queued again.
	c.Notify(uuid)
	if u, _, _ := c.next(ctx); u != uuid {
		t.Fatalf("next = %q, want the node", u)
	}
	c.process(ctx, uuid)
	c.Notify(uuid) // a request recorded after the pass released the node
	c.done(uuid)
	if q := queuedNow(c); q != 1 {
		t.Errorf("%d entries queued after a request that came after the pass, want 1", q)
	}
}
