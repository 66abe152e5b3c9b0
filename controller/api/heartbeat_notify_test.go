package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// A heartbeat the conductor must act on wakes it through NotifyAgent, so
// that the agent's node goes ahead of other queued work; without
// NotifyAgent, through Notify.
func TestHeartbeatWakesTheConductorAsAnAgent(t *testing.T) {
	for _, withAgent := range []bool{true, false} {
		n := &proto.Node{UUID: "5f0c2d1e-3a4b-4c5d-8e6f-7a8b9c0d1e2f", Driver: "fake-hardware",
			ProvisionState: proto.StateCleanWait, DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}}
		st := storeWith(t, n)
		var mu sync.Mutex
		var work, agent []string
		note := func(to *[]string) func(string) {
			return func(u string) { mu.Lock(); defer mu.Unlock(); *to = append(*to, u) }
		}
		cfg := api.Config{Store: st, Conductor: "c1", Notify: note(&work)}
		if withAgent {
			cfg.NotifyAgent = note(&agent)
		}
		srv := httptest.NewServer(api.New(cfg))
		defer srv.Close()
		if code := postHeartbeat(t, srv.URL, n.UUID, "tok"); code != http.StatusAccepted {
			t.Fatalf("heartbeat: %d", code)
		}
		mu.Lock()
		gotWork, gotAgent := len(work), len(agent)
		mu.Unlock()
		wantWork, wantAgent := 0, 1
		if !withAgent {
			wantWork, wantAgent = 1, 0
		}
		if gotWork != wantWork || gotAgent != wantAgent {
			t.Errorf("NotifyAgent set %v: Notify called %d times, NotifyAgent %d, want %d and %d", withAgent, gotWork, gotAgent, wantWork, wantAgent)
		}
	}
}

// Every heartbeat the API accepts reaches AgentHeartbeated, acted on or
// only recorded (a conductor waiting on the agent's command looks at it
// then); a refused one does not.
func TestHeartbeatReachesAWaitingConductor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  proto.ProvisionState
		token  string
		status int
		want   int
	}{
		{"acted on", proto.StateDeployWait, "tok", http.StatusAccepted, 1},
		{"only recorded: the conductor is running a step", proto.StateDeploying, "tok", http.StatusAccepted, 1},
		{"refused: wrong token", proto.StateDeploying, "not-the-token", http.StatusBadRequest, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := proto.StateActive
			n := &proto.Node{UUID: "5f0c2d1e-3a4b-4c5d-8e6f-7a8b9c0d1e2f", Driver: "fake-hardware", ProvisionState: tc.state,
				TargetProvisionState: &target, DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}}
			st := storeWith(t, n)
			var mu sync.Mutex
			var beats []string
			srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1", Notify: func(string) {}, NotifyAgent: func(string) {},
				AgentHeartbeated: func(u string) { mu.Lock(); defer mu.Unlock(); beats = append(beats, u) }}))
			defer srv.Close()
			code := postHeartbeat(t, srv.URL, n.UUID, tc.token)
			mu.Lock()
			defer mu.Unlock()
			if code != tc.status || len(beats) != tc.want || (tc.want > 0 && beats[0] != n.UUID) {
				t.Errorf("heartbeat %d, AgentHeartbeated %v; want %d and %d call(s)", code, beats, tc.status, tc.want)
			}
		})
	}
}

// postHeartbeat sends node uuid's agent heartbeat with token to the API at
// base and returns the answer's status.
func postHeartbeat(t *testing.T, base, uuid, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/heartbeat/"+uuid,
		strings.NewReader(`{"callback_url": "http://10.0.0.7:9999", "agent_token": "`+token+`", "agent_version": "10.0"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", proto.AgentHeartbeatMicroversion)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// storeWith opens a SQLite store in a temporary directory holding n.
func storeWith(t *testing.T, n *proto.Node) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return st
}
