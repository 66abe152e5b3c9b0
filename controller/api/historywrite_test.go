package api_test

import (
	"context"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
)

// A provision request's history event is stored in the request's own
// write, recording the node as the request left it (as AddHistory right
// after the update did); a refused request records nothing.
func TestProvisionRequestHistoryInOneWrite(t *testing.T) {
	srv, st := newNodeAPI(t)
	n := mustNode(t, srv, `{"driver":"fake-hardware","name":"n1"}`)
	counts, ok := store.WriteCounterOf(st)
	if !ok {
		t.Fatal("the store counts no writes")
	}
	before := counts.WriteCounts()
	if code, body := call(t, srv, "PUT", "/v1/nodes/n1/states/provision", "1.115", `{"target":"manage"}`); code != 202 {
		t.Fatalf("manage: %d %v", code, body)
	}
	after := counts.WriteCounts()
	if u, h := after["update_node"]-before["update_node"], after["history"]-before["history"]; u != 1 || h != 0 {
		t.Errorf("the request took %d node writes and %d history writes, want 1 and 0", u, h)
	}
	if code, body := call(t, srv, "PUT", "/v1/nodes/n1/states/provision", "1.115", `{"target":"deleted"}`); code != 400 {
		t.Fatalf("a refused request: %d %v", code, body)
	}
	evs, err := st.ListHistory(context.Background(), n["uuid"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("history = %+v, want the creation and the request", evs)
	}
	ev := evs[1]
	node, err := st.GetNode(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Event != `Provision request "manage" from state "enroll"` || ev.EventType != "api" || ev.Conductor != "c1" || ev.Severity != "INFO" {
		t.Errorf("event = %+v", ev)
	}
	if ev.State != string(node.ProvisionState) || ev.State == "enroll" || ev.DurationSeconds == nil || *ev.DurationSeconds < 0 {
		t.Errorf("event records state %q, duration %v; want the node after the request (%s), ≥ 0 s since its change", ev.State, ev.DurationSeconds, node.ProvisionState)
	}
	if (ev.TargetProvisionState == nil) != (node.TargetProvisionState == nil) ||
		ev.TargetProvisionState != nil && *ev.TargetProvisionState != string(*node.TargetProvisionState) {
		t.Errorf("event records target %v, node has %v", ev.TargetProvisionState, node.TargetProvisionState)
	}
}
