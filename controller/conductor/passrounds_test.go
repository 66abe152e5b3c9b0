package conductor

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// instantAgent finishes each clean step the moment it is sent and
// heartbeats at once, recorded and announced as the API does, while the
// pass that sent the step still holds the node.
type instantAgent struct {
	stubAgent
	st       store.Store
	c        *Conductor
	uuid     string
	executed []string
	err      error
}

func (a *instantAgent) ExecuteStep(ctx context.Context, _ agentclient.Agent, kind proto.StepKind, step proto.StepCall, _, _ any, _ map[string]string) (proto.CommandResult, error) {
	a.executed = append(a.executed, step.Step.Step)
	res, _ := json.Marshal(proto.ExecuteStepResult{Kind: kind, Step: step})
	done := proto.CommandResult{CommandName: "execute_clean_step", CommandStatus: proto.CommandSucceeded, CommandResult: res}
	a.cmds = append(a.cmds, done)
	if _, err := a.st.UpdateNode(ctx, a.uuid, func(n *proto.Node) error {
		n.DriverInternalInfo[proto.InfoHeartbeatPending] = time.Now().UTC().Format(time.RFC3339Nano)
		return nil
	}); err != nil && a.err == nil {
		a.err = err
	}
	a.c.NotifyAgent(a.uuid)
	return proto.CommandResult{CommandName: "execute_clean_step", CommandStatus: proto.CommandRunning}, nil
}

func (*instantAgent) PowerOff(context.Context, agentclient.Agent) error { return nil }

// cleanSteps is a clean of k agent steps, in the order they run.
func cleanSteps(k int) []proto.StepCall {
	steps := make([]proto.StepCall, k)
	for i := range steps {
		steps[i] = proto.StepCall{Step: proto.Step{Step: fmt.Sprintf("step_%d", i), Interface: "deploy", Priority: 90 - i}}
	}
	return steps
}

// instantClean puts node uuid in clean wait, its agent done with the
// first of k steps and finishing the others at once, under a conductor
// over st, a store that writes to base.
func instantClean(t *testing.T, base, st store.Store, uuid string, k int) (*Conductor, *instantAgent) {
	t.Helper()
	steps := cleanSteps(k)
	cleanWaitNode(t, base, uuid, steps, time.Now().UTC().Add(-time.Second))
	first, _ := json.Marshal(proto.ExecuteStepResult{Kind: proto.StepClean, Step: steps[0]})
	agent := &instantAgent{st: base, uuid: uuid}
	agent.cmds = []proto.CommandResult{
		{CommandName: "get_clean_steps", CommandStatus: proto.CommandSucceeded},
		{CommandName: "execute_clean_step", CommandStatus: proto.CommandSucceeded, CommandResult: first},
	}
	c := New(Config{Store: st, Agent: agent, Name: "c1"})
	t.Cleanup(c.stopWakes)
	agent.c = c
	return c, agent
}

// runInstantClean runs one pass over a node in clean wait whose agent
// finished the first of k steps, with an agent that finishes the others
// at once.
func runInstantClean(t *testing.T, k int) (*Conductor, *countingStore, *instantAgent, *proto.Node) {
	t.Helper()
	ctx := context.Background()
	st := openCountingStore(t)
	uuid := "7b2e4f10-3c5d-4e6f-8a9b-0c1d2e3f4a5b"
	c, agent := instantClean(t, st.Store, st, uuid, k)

	c.NotifyAgent(uuid)
	if u, _, ok := c.next(ctx); !ok || u != uuid {
		t.Fatalf("next = %q, %v; want the node", u, ok)
	}
	c.process(ctx, uuid)
	c.done(uuid)
	if agent.err != nil {
		t.Fatal(agent.err)
	}
	n, err := st.GetNode(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	return c, st, agent, n
}

// An agent that answers each step at once is carried through the rest of
// its clean by the pass that holds the node: each heartbeat, recorded
// while the pass held the node, is found by the write that was to
// release it, and answered in another round. One reservation for the
// whole clean, the release riding the last write, nothing left queued.
func TestAPassAnswersHeartbeatsThatComeWhileItHoldsTheNode(t *testing.T) {
	c, st, agent, n := runInstantClean(t, 3)
	if want := []string{"step_1", "step_2"}; fmt.Sprint(agent.executed) != fmt.Sprint(want) {
		t.Fatalf("steps sent %v, want %v", agent.executed, want)
	}
	if n.ProvisionState != proto.StateAvailable || n.Reservation != nil {
		t.Fatalf("node %s, reservation %v; want available and released", n.ProvisionState, n.Reservation)
	}
	if r, rel := st.reserves.Load(), st.releases.Load(); r != 1 || rel != 0 {
		t.Errorf("%d reservations, %d releases; want 1 and 0 (the release rides the last write)", r, rel)
	}
	if r := testutil.ToFloat64(c.waits.rounds); r != 2 {
		t.Errorf("%v rounds added, want 2 (one per heartbeat that came during the pass)", r)
	}
	if q := queuedNow(c); q != 0 {
		t.Errorf("%d entries queued after the pass, want 0", q)
	}
}

// Rounds are bounded: an agent that always answers at once does not keep
// the worker. The pass ends after maxRounds added rounds with the last
// heartbeat pending, and the node goes back to the agent lane.
func TestAPassAddsAtMostMaxRounds(t *testing.T) {
	k := maxRounds + 3
	c, st, agent, n := runInstantClean(t, k)
	if len(agent.executed) != maxRounds+1 {
		t.Fatalf("%d steps sent in one pass (%v), want %d", len(agent.executed), agent.executed, maxRounds+1)
	}
	if n.Reservation != nil || n.ProvisionState != proto.StateCleanWait {
		t.Fatalf("node %s, reservation %v; want clean wait, released", n.ProvisionState, n.Reservation)
	}
	fs, err := flowstate.Of(n)
	if err != nil {
		t.Fatal(err)
	}
	if fs.HeartbeatPending.IsZero() {
		t.Error("no heartbeat pending after the pass, want the last one left for the next pass")
	}
	if r := testutil.ToFloat64(c.waits.rounds); r != maxRounds {
		t.Errorf("%v rounds added, want %d", r, maxRounds)
	}
	c.mu.Lock()
	lane := c.queued[n.UUID]
	c.mu.Unlock()
	if lane != laneAgent {
		t.Errorf("node in lane %d after the pass, want the agent lane", lane)
	}
	if r := st.reserves.Load(); r != 1 {
		t.Errorf("%d reservations, want 1", r)
	}
}
