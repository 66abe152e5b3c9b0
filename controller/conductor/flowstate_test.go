package conductor

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// A node whose driver_internal_info does not decode fails its flow with an
// error that names the key, rather than acting on half a record; the bad
// value stays in the record for an operator to see.
func TestUnreadableFlowStateFailsTheFlow(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	target := proto.StateActive
	n := &proto.Node{UUID: "6a1f0c2e-9b7d-4c3a-8e5f-1d2c3b4a5f60", Driver: "fake-hardware", ProvisionState: proto.StateDeployWait,
		PowerInterface: "fake", ManagementInterface: "fake", BootInterface: "fake", InspectInterface: "fake", DeployInterface: "fake",
		TargetProvisionState: &target, DriverInternalInfo: proto.Dict{
			proto.InfoAgentURL: "http://192.0.2.1:9999", proto.InfoSteps: []any{}, proto.InfoStepIndex: "two",
			proto.InfoHeartbeatPending: time.Now().UTC().Format(time.RFC3339Nano),
		}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	c := New(Config{Store: st, Agent: &stubAgent{}, Name: "c1"})
	cur, err := st.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&flow{c: c, n: cur}).act(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ProvisionState != proto.StateDeployFailed {
		t.Errorf("state %s, want %s", got.ProvisionState, proto.StateDeployFailed)
	}
	if got.LastError == nil || !strings.Contains(*got.LastError, "driver_internal_info.kiln_step_index") {
		t.Errorf("last_error %v does not name the bad key", got.LastError)
	}
	if got.DriverInternalInfo[proto.InfoStepIndex] != "two" {
		t.Errorf("the bad value was not kept: %v", got.DriverInternalInfo)
	}
}
