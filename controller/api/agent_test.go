package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// finishingServer answers the agent API with a notifier that plays a
// conductor finishing at once: the node leaves inspect wait and loses its
// agent keys before the handler returns, as a fast conductor can.
func finishingServer(t *testing.T) (*httptest.Server, store.Store, *proto.Node) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := &proto.Node{UUID: "0e1a6c1e-2f7b-4c43-a1f0-5d3c6a4b2e10", Driver: "fake-hardware",
		ProvisionState: proto.StateInspectWait, DriverInternalInfo: proto.Dict{}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := st.CreatePort(ctx, &proto.Port{UUID: "7d1e1c3a-9b2e-4a55-8f00-1c2d3e4f5a6b", NodeUUID: n.UUID, Address: "52:54:00:aa:bb:01"}); err != nil {
		t.Fatal(err)
	}
	finish := func(uuid string) {
		if _, err := st.UpdateNode(ctx, uuid, func(n *proto.Node) error {
			n.ProvisionState = proto.StateManageable
			delete(n.DriverInternalInfo, proto.InfoAgentToken)
			delete(n.DriverInternalInfo, proto.InfoInspectionPending)
			return nil
		}); err != nil {
			t.Errorf("finish: %v", err)
		}
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1", Notify: finish}))
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return srv, st, n
}

// A token handed out with the inspection answer is recorded before the
// conductor is woken, so the conductor's wipe when it finishes removes it:
// a finished node never keeps a token an old agent could use.
func TestContinueInspectionTokenNotLeftBehind(t *testing.T) {
	srv, st, n := finishingServer(t)
	body := `{"inventory": {"interfaces": [{"name": "eth0", "mac_address": "52:54:00:aa:bb:01"}], "boot": {"pxe_interface": "52:54:00:aa:bb:01"}}}`
	req, _ := http.NewRequest("POST", srv.URL+"/v1/continue_inspection", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.84")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc proto.InspectionResponse
	json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("continue_inspection: %d", resp.StatusCode)
	}
	if doc.Config == nil || doc.Config.AgentToken == "" || doc.Config.AgentToken == proto.MaskedToken {
		t.Errorf("1.84 answer carries no fresh token: %+v", doc.Config)
	}
	if doc.Config == nil || !doc.Config.ImmediateHeartbeat {
		t.Errorf("answer does not tell the agent this is Kiln (kiln_immediate_heartbeat): %+v", doc.Config)
	}
	got, err := st.GetNode(context.Background(), n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ProvisionState != proto.StateManageable {
		t.Fatalf("state %s: the notifier did not run", got.ProvisionState)
	}
	if tok, has := got.DriverInternalInfo[proto.InfoAgentToken]; has {
		t.Errorf("token %v left on a node that finished inspection", tok)
	}
}

// A lookup for a node that is no longer waiting for an agent is refused and
// adds nothing to it.
func TestLookupAfterFinishAddsNoToken(t *testing.T) {
	srv, st, n := finishingServer(t)
	if _, err := st.UpdateNode(context.Background(), n.UUID, func(n *proto.Node) error {
		n.ProvisionState = proto.StateManageable
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/v1/lookup?addresses=52:54:00:aa:bb:01", nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.84")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("lookup of a manageable node: %d, want 404", resp.StatusCode)
	}
	got, _ := st.GetNode(context.Background(), n.UUID)
	if _, has := got.DriverInternalInfo[proto.InfoAgentToken]; has {
		t.Errorf("lookup added a token to a manageable node")
	}
}
