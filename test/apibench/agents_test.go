package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/kilnproc"
)

var kilnBin string

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin) }

// The heartbeat route measures what agents send on nodes that accept it:
// every heartbeat of a run on a real kiln serve is answered 202 and
// recorded on its node.
func TestHeartbeatRouteIsAccepted(t *testing.T) {
	p := kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), "--conductor", "apibench-test",
		"--power-sync-interval", "0", "--agent-lookup-rate", "0")
	img := imageServer()
	defer img.Close()
	cl := &client{http: &http.Client{Timeout: time.Minute}, version: "1.82"}
	agents, err := cl.prepareAgents(p.URL, 3, img.URL+"/apibench.img")
	if err != nil {
		t.Fatal(err)
	}
	if len(agents) != 3 {
		t.Fatalf("%d agents, want 3", len(agents))
	}
	var hb route
	for _, r := range routes(agents[0].uuid, agents, "heartbeat") {
		if r.name == "heartbeat" {
			hb = r
		}
	}
	if len(hb.reqs) != 3 {
		t.Fatalf("heartbeat route has %d requests, want one per agent", len(hb.reqs))
	}
	res := cl.run(endpoint{url: p.URL}, hb, 3, 300*time.Millisecond)
	if res.count == 0 || res.codes[http.StatusAccepted] != res.count {
		t.Fatalf("heartbeats answered %s, want only 202", res.statuses())
	}
	for i, a := range agents {
		code, b, err := cl.call(t.Context(), "GET", p.URL+"/v1/nodes/"+a.uuid+"?fields=provision_state,maintenance,driver_internal_info", "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("get %s: %d %s %v", a.uuid, code, b, err)
		}
		var n struct {
			ProvisionState string         `json:"provision_state"`
			Maintenance    bool           `json:"maintenance"`
			DII            map[string]any `json:"driver_internal_info"`
		}
		if err := json.Unmarshal(b, &n); err != nil {
			t.Fatal(err)
		}
		if n.ProvisionState != "wait call-back" || !n.Maintenance || n.DII["agent_url"] != a.callback || n.DII["agent_version"] != "9.4.1" || n.DII["agent_last_heartbeat"] == nil {
			t.Errorf("agent %d's node after the heartbeats: %s", i, b)
		}
	}
}
