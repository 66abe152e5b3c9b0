package conductor

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// stubAgent answers Commands with a fixed list; the rest is unused here.
type stubAgent struct {
	AgentClient
	cmds []proto.CommandResult
}

func (s *stubAgent) Commands(context.Context, agentclient.Agent) ([]proto.CommandResult, error) {
	return s.cmds, nil
}

// A heartbeat while write_image runs records the agent's progress on the
// node, where the API, the event stream and the metrics read it; a
// heartbeat with the same progress writes nothing.
func TestHeartbeatRecordsStepProgress(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var seen []events.Event
	wst := events.Watch(st, func(c events.Change) { seen = append(seen, c.After) })
	step := proto.StepCall{Step: proto.Step{Step: "write_image", Interface: "deploy", Priority: 80}}
	target := proto.StateActive
	n := &proto.Node{UUID: "3f2c9a8e-0d4b-4e55-9c1a-5b6d7e8f9a01", Driver: "fake-hardware", ProvisionState: proto.StateDeployWait,
		PowerInterface: "fake", ManagementInterface: "fake", BootInterface: "fake", InspectInterface: "fake", DeployInterface: "direct",
		TargetProvisionState: &target, DeployStep: proto.Dict{"interface": "deploy", "step": "write_image"},
		DriverInternalInfo: proto.Dict{
			proto.InfoAgentURL: "http://192.0.2.1:9999", proto.InfoSteps: []proto.StepCall{step},
			proto.InfoStepIndex: 0, proto.InfoStepSent: true, proto.InfoHeartbeatPending: time.Now().UTC().Format(time.RFC3339Nano),
		}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	running := func(done int64) []proto.CommandResult {
		res, _ := json.Marshal(proto.CommandProgressResult{Progress: proto.CommandProgress{BytesDone: done, BytesTotal: 4096, Stage: "write"}})
		return []proto.CommandResult{
			{CommandName: "get_deploy_steps", CommandStatus: proto.CommandSucceeded},
			{CommandName: "execute_deploy_step", CommandStatus: proto.CommandRunning, CommandResult: res},
		}
	}
	agent := &stubAgent{cmds: running(1024)}
	c := New(Config{Store: wst, Agent: agent, Name: "c1"})
	heartbeat := func() {
		t.Helper()
		if _, err := wst.UpdateNode(ctx, n.UUID, func(n *proto.Node) error {
			n.DriverInternalInfo[proto.InfoHeartbeatPending] = time.Now().UTC().Format(time.RFC3339Nano)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		cur, err := st.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		f := &flow{c: c, n: cur}
		if err := f.act(ctx); err != nil {
			t.Fatal(err)
		}
	}
	heartbeat()
	heartbeat() // same progress: no new event
	agent.cmds = running(3072)
	heartbeat()
	var got []string
	for _, e := range seen {
		if e.Progress != nil {
			got = append(got, fmt.Sprintf("%s %s %d/%d", e.Step, e.Progress.Step, e.Progress.BytesDone, e.Progress.BytesTotal))
		}
	}
	want := "[deploy.write_image deploy.write_image 1024/4096 deploy.write_image deploy.write_image 3072/4096]"
	if fmt.Sprint(got) != want {
		t.Errorf("progress events:\n got %v\nwant %s", got, want)
	}
	stored, _ := st.GetNode(ctx, n.UUID)
	if p := events.ProgressOf(stored); p == nil || p.BytesDone != 3072 || p.UpdatedAt == nil {
		t.Errorf("stored progress = %+v", p)
	}
	if stored.ProvisionState != proto.StateDeployWait {
		t.Errorf("state = %s, want wait call-back", stored.ProvisionState)
	}
}
