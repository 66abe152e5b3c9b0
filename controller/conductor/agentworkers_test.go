package conductor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// signalAgent reports each command-list read on a channel and answers
// that the running step still runs.
type signalAgent struct {
	stubAgent
	read chan struct{}
}

func (a *signalAgent) Commands(context.Context, agentclient.Agent) ([]proto.CommandResult, error) {
	select {
	case a.read <- struct{}{}:
	default:
	}
	return []proto.CommandResult{
		{CommandName: "get_clean_steps", CommandStatus: proto.CommandSucceeded},
		{CommandName: "execute_clean_step", CommandStatus: proto.CommandRunning},
	}, nil
}

// verifying has nodes verify their BMC credentials, as the manage verb
// asks: their next pass reads each one's power state.
func verifying(t *testing.T, st store.Store, uuids ...string) {
	t.Helper()
	target := proto.StateManageable
	for _, u := range uuids {
		if _, err := st.UpdateNode(context.Background(), u, func(n *proto.Node) error {
			n.ProvisionState, n.TargetProvisionState = proto.StateVerifying, &target
			flowstate.Update(n, func(s *flowstate.State) { s.Request = &flowstate.Request{Verb: "manage", From: proto.StateEnroll} })
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// An agent heartbeat is acted on while every general worker is busy with
// a slow BMC: the agent workers take the agent lane alone.
func TestAgentWorkersServeHeartbeatsWhileWorkersAreBusy(t *testing.T) {
	agent := &signalAgent{read: make(chan struct{}, 1)}
	c, st := testConductor(t, Config{Workers: 1, AgentWorkers: 1, Agent: agent, ScanInterval: time.Hour, PowerSyncInterval: -1})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	// Node A verifies its BMC credentials; its BMC does not answer until
	// the test ends, which holds the one general worker.
	a := addNodes(t, st, testHW, 1, func(int) string { return "" })[0]
	blocked, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer close(unblock)
	power.set(func(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
		if n.UUID == a {
			once.Do(func() { close(blocked) })
			select {
			case <-unblock:
			case <-ctx.Done():
			}
		}
		return proto.PowerOff, nil
	})
	defer power.set(nil)
	verifying(t, st, a)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = c.Run(ctx)
	}()
	c.Notify(a)
	select {
	case <-blocked:
	case <-time.After(time.Minute): // safety net only
		t.Fatal("node A's power read never started")
	}

	// Node B's agent heartbeats, its step running.
	clean := proto.StateAvailable
	b := &proto.Node{UUID: "5d0e2f6a-3c1b-4a7e-8f90-1a2b3c4d5e6f", Driver: "fake-hardware", ProvisionState: proto.StateCleanWait, TargetProvisionState: &clean,
		PowerInterface: "fake", ManagementInterface: "fake", BootInterface: "fake", InspectInterface: "fake", DeployInterface: "direct",
		DriverInternalInfo: proto.Dict{proto.InfoAgentURL: "http://192.0.2.1:9999", proto.InfoStepIndex: 0, proto.InfoStepSent: true,
			proto.InfoSteps:            []proto.StepCall{{Step: proto.Step{Step: "erase_devices", Interface: "deploy", Priority: 10}}},
			proto.InfoHeartbeatPending: time.Now().UTC().Format(time.RFC3339Nano)}}
	if err := st.CreateNode(ctx, b); err != nil {
		t.Fatal(err)
	}
	c.NotifyAgent(b.UUID)
	select {
	case <-agent.read:
	case <-time.After(time.Minute): // safety net only: without agent workers B waits for A
		t.Fatal("node B's heartbeat waited for the busy worker")
	}
}
