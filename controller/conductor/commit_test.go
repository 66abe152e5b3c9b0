package conductor

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// countingStore counts the node writes a pass makes.
type countingStore struct {
	store.Store
	updates, reserves, releases atomic.Int32
}

func (s *countingStore) UpdateNode(ctx context.Context, ident string, fn func(n *proto.Node) error) (*proto.Node, error) {
	s.updates.Add(1)
	return s.Store.UpdateNode(ctx, ident, fn)
}

func (s *countingStore) Reserve(ctx context.Context, ident, conductor string) (*proto.Node, error) {
	s.reserves.Add(1)
	return s.Store.Reserve(ctx, ident, conductor)
}

func (s *countingStore) Release(ctx context.Context, uuid, conductor string) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, uuid, conductor)
}

// stepAgent reports step 0 of the plan done and, when asked to run the
// next, checks what the store says at that moment and has the agent
// heartbeat again at once (as an agent whose step takes no time does).
type stepAgent struct {
	stubAgent
	st       store.Store
	uuid     string
	beat     time.Time
	executed []string
	// seen is the stored flow state when the step was sent.
	seen flowstate.State
	err  error
}

func (a *stepAgent) ExecuteStep(ctx context.Context, _ agentclient.Agent, _ proto.StepKind, step proto.StepCall, _, _ any, _ map[string]string) (proto.CommandResult, error) {
	a.executed = append(a.executed, step.Step.Step)
	n, err := a.st.GetNode(ctx, a.uuid)
	if err != nil {
		a.err = err
		return proto.CommandResult{}, err
	}
	a.seen, a.err = flowstate.Of(n)
	// The API records the next heartbeat while the node is held; the
	// agent lists the step as running.
	_, a.err = a.st.UpdateNode(ctx, a.uuid, func(n *proto.Node) error {
		n.DriverInternalInfo[proto.InfoHeartbeatPending] = a.beat.Format(time.RFC3339Nano)
		return nil
	})
	running := proto.CommandResult{CommandName: "execute_clean_step", CommandStatus: proto.CommandRunning}
	a.cmds = append(a.cmds, running)
	return running, nil
}

// A heartbeat that ends one agent step and starts the next is one
// reservation and two node writes: the step's end stored before the next
// step goes to the agent, and the step sent stored with the release. A
// heartbeat the API records meanwhile survives: the write that was to
// release the node finds it, and the pass answers it in another round
// (the step still runs: one more write, which releases the node).
func TestAStepHeartbeatWritesTheNodeTwice(t *testing.T) {
	ctx := context.Background()
	st := openCountingStore(t)
	base := st.Store
	steps := twoCleanSteps()
	target := proto.StateAvailable
	first := time.Now().UTC().Add(-time.Second)
	n := &proto.Node{UUID: "0c7f3a51-6b2e-4d8a-9f10-2e3d4c5b6a70", Driver: "fake-hardware", ProvisionState: proto.StateCleanWait,
		PowerInterface: "fake", ManagementInterface: "fake", BootInterface: "fake", InspectInterface: "fake", DeployInterface: "direct",
		TargetProvisionState: &target, CleanStep: proto.Dict{"interface": "deploy", "step": "erase_devices_metadata"},
		DriverInternalInfo: proto.Dict{
			proto.InfoAgentURL: "http://192.0.2.1:9999", proto.InfoSteps: steps,
			proto.InfoStepIndex: 0, proto.InfoStepSent: true, proto.InfoHeartbeatPending: first.Format(time.RFC3339Nano),
		}}
	if err := base.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	done, _ := json.Marshal(proto.ExecuteStepResult{Kind: proto.StepClean, Step: steps[0]})
	agent := &stepAgent{st: base, uuid: n.UUID, beat: first.Add(time.Second)}
	agent.cmds = []proto.CommandResult{
		{CommandName: "get_clean_steps", CommandStatus: proto.CommandSucceeded},
		{CommandName: "execute_clean_step", CommandStatus: proto.CommandSucceeded, CommandResult: done},
	}
	c := New(Config{Store: st, Agent: agent, Name: "c1"})
	name := "c1"
	if _, err := base.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.Conductor = &name; return nil }); err != nil {
		t.Fatal(err)
	}

	c.process(ctx, n.UUID)

	if agent.err != nil {
		t.Fatal(agent.err)
	}
	if len(agent.executed) != 1 || agent.executed[0] != "erase_devices" {
		t.Fatalf("steps sent %v, want [erase_devices]", agent.executed)
	}
	if agent.seen.StepIndex != 1 || agent.seen.StepSent {
		t.Errorf("stored when the step was sent: index %d sent %v, want the first step's end stored (1, false)", agent.seen.StepIndex, agent.seen.StepSent)
	}
	if r, u, rel := st.reserves.Load(), st.updates.Load(), st.releases.Load(); r != 1 || u != 3 || rel != 0 {
		t.Errorf("store calls: %d reserve, %d update, %d release; want 1, 3 (two for the step, one for the heartbeat that came meanwhile), 0", r, u, rel)
	}
	got, err := base.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := flowstate.Of(got)
	if err != nil {
		t.Fatal(err)
	}
	if got.Reservation != nil || got.ProvisionState != proto.StateCleanWait || fs.StepIndex != 1 || !fs.StepSent {
		t.Errorf("stored: reservation %v state %s index %d sent %v; want released, clean wait, 1, true", got.Reservation, got.ProvisionState, fs.StepIndex, fs.StepSent)
	}
	if !fs.HeartbeatPending.IsZero() {
		t.Errorf("pending heartbeat %v after the pass, want the one recorded during the pass (%v) answered", fs.HeartbeatPending, agent.beat)
	}
	c.mu.Lock()
	lane := c.queued[n.UUID]
	c.mu.Unlock()
	if lane != laneNone {
		t.Errorf("node queued in lane %d after the pass answered its heartbeat, want none", lane)
	}
}

// openCountingStore opens a SQLite store in t's temp dir, closed with t,
// behind a countingStore.
func openCountingStore(t *testing.T) *countingStore {
	t.Helper()
	base, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	return &countingStore{Store: base}
}

// twoCleanSteps is a clean of two agent steps.
func twoCleanSteps() []proto.StepCall {
	return []proto.StepCall{
		{Step: proto.Step{Step: "erase_devices_metadata", Interface: "deploy", Priority: 99}},
		{Step: proto.Step{Step: "erase_devices", Interface: "deploy", Priority: 10}},
	}
}
