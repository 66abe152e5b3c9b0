package api

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// syncBuffer is a log sink the server's goroutines write concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHeartbeatNeverShowsTokens: neither the node's agent token nor a
// wrong one an agent sends appears in any answer or in the debug log,
// whichever way the heartbeat goes (recorded, written nothing, refused,
// malformed).
func TestHeartbeatNeverShowsTokens(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const token, wrong = "node-secret-token-6f1d", "wrong-secret-token-93aa"
	n := &proto.Node{UUID: "7d6c5b4a-3e2f-4a1b-9c8d-7e6f5a4b3c2d", Driver: "fake-hardware", ProvisionState: proto.StateInspectWait,
		DriverInternalInfo: proto.Dict{proto.InfoAgentToken: token}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	srv := httptest.NewServer(New(Config{Store: st, Conductor: "c1",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}))
	defer srv.Close()
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"recorded", `{"callback_url":"http://10.0.0.5:9999","agent_version":"10.1","agent_token":"` + token + `"}`, http.StatusAccepted},
		{"repeated: nothing written", `{"callback_url": "http://10.0.0.5:9999", "agent_version": "10.1", "agent_token": "` + token + `"}`, http.StatusAccepted},
		{"wrong token", `{"callback_url":"http://10.0.0.5:9999","agent_version":"10.1","agent_token":"` + wrong + `"}`, http.StatusBadRequest},
		{"URL pinned", `{"callback_url":"http://10.0.0.6:9999","agent_version":"10.1","agent_token":"` + token + `"}`, http.StatusBadRequest},
		{"not a string", `{"callback_url":5,"agent_version":"10.1","agent_token":"` + wrong + `"}`, http.StatusBadRequest},
		{"unknown field", `{"callback_url":"http://10.0.0.5:9999","agent_version":"10.1","agent_token":"` + wrong + `","x":"` + token + `"}`, http.StatusBadRequest},
		{"broken JSON", `{"agent_token":"` + wrong + `"`, http.StatusBadRequest},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/heartbeat/"+n.UUID, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(proto.HeaderIronicAPIVersion, "1.95")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d (%s), want %d", tc.name, resp.StatusCode, body, tc.status)
		}
		for _, secret := range []string{token, wrong} {
			if strings.Contains(string(body), secret) {
				t.Errorf("%s: the answer shows a token: %s", tc.name, body)
			}
		}
	}
	got, err := st.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.DriverInternalInfo[proto.InfoAgentVersion] != "10.1" {
		t.Errorf("the accepted heartbeat was not recorded: %v", got.DriverInternalInfo)
	}
	if !strings.Contains(logs.String(), "Invalid or missing agent token") {
		t.Fatalf("the refused heartbeats were not logged, so the log proves nothing:\n%s", logs.String())
	}
	for _, secret := range []string{token, wrong} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log shows a token:\n%s", logs.String())
		}
	}
}
