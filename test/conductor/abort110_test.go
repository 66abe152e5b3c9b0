package conductor_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// TestAbortInWaitCallBack: from 1.110 an operator may abort a deploy while
// Kiln waits for the agent; the node fails the deploy and stays in
// deploy failed (no automated clean), as Ironic does. Below 1.110 the
// same request is 406 (TestAbortWhileWaitingForTheAgent).
func TestAbortInWaitCallBack(t *testing.T) {
	c := startController(t, controllerOpts{})
	m := &machine{noBoot: true}
	uuid := c.enroll("node-abort-deploy", "52:54:00:00:16:11", map[string]any{"automated_clean": false,
		"instance_info": map[string]any{"image_source": "http://images.example/x.raw", "image_checksum": "0123456789abcdef0123456789abcdef"}}, m)
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "provide"})
	c.waitState(uuid, proto.StateAvailable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "active"})
	c.waitState(uuid, proto.StateDeployWait, 10*time.Second)

	req, _ := http.NewRequest("PUT", c.URL+"/v1/nodes/"+uuid+"/states/provision", strings.NewReader(`{"target":"abort"}`))
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.110")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("abort in wait call-back at 1.110: %d", resp.StatusCode)
	}
	n := c.waitState(uuid, proto.StateDeployFailed, 10*time.Second)
	if n["last_error"] == nil || n["target_provision_state"] != "active" {
		t.Errorf("after abort: last_error %v, target %v", n["last_error"], n["target_provision_state"])
	}
	// Nothing moves it on by itself: the conductor leaves a failed deploy
	// to the operator. Wait for the node to be unlocked (the conductor
	// done with it), then check again.
	deadline := time.Now().Add(10 * time.Second)
	for n["reservation"] != nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		_, n = c.call("GET", "/v1/nodes/"+uuid, nil)
	}
	if n["reservation"] != nil || n["provision_state"] != string(proto.StateDeployFailed) {
		t.Fatalf("after abort: %v, reservation %v", n["provision_state"], n["reservation"])
	}
	// The operator's ways on: undeploy (a clean) or deploy again.
	c.provision(uuid, map[string]any{"target": "deleted"})
	c.waitState(uuid, proto.StateAvailable, 15*time.Second)
}
