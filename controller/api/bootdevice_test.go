package api_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// TestBootDeviceWithoutConductor: with no conductor to answer, a boot
// device request ends with 503 after the bounded wait and is withdrawn,
// so that a conductor starting later does not act on it; while one is
// pending, a second request is refused with 409.
func TestBootDeviceWithoutConductor(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	notified := make(chan string, 10)
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1", ConductorWait: 300 * time.Millisecond,
		Notify: func(u string) { notified <- u }}))
	defer srv.Close()
	code, n := doJSON(t, "POST", srv.URL+"/v1/nodes", map[string]any{"driver": "fake-hardware"})
	if code != 201 {
		t.Fatalf("create: %d %v", code, n)
	}
	uuid := n["uuid"].(string)
	path := srv.URL + "/v1/nodes/" + uuid + "/management/boot_device"

	code, out := doJSON(t, "PUT", path, map[string]any{"boot_device": "pxe"})
	if code != 503 || !strings.Contains(out["error_message"].(string), "No conductor answered") {
		t.Errorf("PUT with no conductor = %d %v, want 503", code, out)
	}
	if got := <-notified; got != uuid {
		t.Errorf("notified %s, want %s", got, uuid)
	}
	node, err := st.GetNode(t.Context(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := node.DriverInternalInfo[proto.InfoManagementRequest]; ok {
		t.Errorf("the unanswered request was left on the node: %v", node.DriverInternalInfo)
	}

	// A pending request (a conductor is about to act) blocks a second one.
	if _, err := st.UpdateNode(t.Context(), uuid, func(n *proto.Node) error {
		n.DriverInternalInfo[proto.InfoManagementRequest] = proto.ToDict(proto.ManagementRequest{ID: "other", Op: proto.OpGetBootDevice, RequestedAt: time.Now()})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if code, out := doJSON(t, "GET", path, nil); code != 409 {
		t.Errorf("GET while another request is pending = %d %v, want 409", code, out)
	}
	if code, out := doJSON(t, "PUT", path, map[string]any{"boot_device": "floppy"}); code != 400 {
		t.Errorf("PUT of a device the hardware type lacks = %d %v, want 400 at once", code, out)
	}
}
