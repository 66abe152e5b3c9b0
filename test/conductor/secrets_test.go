package conductor_test

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/fakeagent"
)

// lockedBuffer is a bytes.Buffer safe for the controller's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// followEvents copies the raw GET /v1/events stream into a buffer until the
// test ends.
func followEvents(t *testing.T, c *controller) *lockedBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", c.URL+"/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	buf := &lockedBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			buf.Write(append(sc.Bytes(), '\n'))
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return buf
}

// brokenAgent accepts connections and closes them without an answer: every
// call the conductor makes to it fails with an error that names the URL it
// called, agent_token included.
func brokenAgent(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAgentTokenNeverLeaks: an agent call that fails on the connection puts
// neither the agent token into last_error, node history, /v1/events or the
// log, and once the node leaves the agent's states its stored
// driver_internal_info no longer holds the token (issue 12).
func TestAgentTokenNeverLeaks(t *testing.T) {
	logs := &lockedBuffer{}
	c := startController(t, controllerOpts{logTo: logs})
	m := &machine{cfg: fakeagent.Config{CallbackURLOverride: brokenAgent(t)}}
	uuid := c.enroll("node-token-leak", "52:54:00:00:19:01", nil, m)
	events := followEvents(t, c)
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 10*time.Second)
	c.provision(uuid, map[string]any{"target": "provide"})
	n := c.waitState(uuid, proto.StateCleanFailed, 30*time.Second)

	m.mu.Lock()
	token := m.agents[0].Token()
	m.mu.Unlock()
	if len(token) < 16 {
		t.Fatalf("the agent holds no real token (%q); the test cannot tell a leak", token)
	}
	le, _ := n["last_error"].(string)
	if !strings.Contains(le, "agent_token=") {
		// The failure must be the agent call, with its URL, for this test to
		// prove anything.
		t.Fatalf("last_error does not come from the failed agent call: %q", le)
	}
	_, hist := c.call("GET", "/v1/nodes/"+uuid+"/history?detail=true", nil)
	stored, err := c.st.GetNode(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	storedHist, err := c.st.ListHistory(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	var storedEvents strings.Builder
	for _, ev := range storedHist {
		storedEvents.WriteString(ev.Event + "\n")
	}
	// The stream may still be delivering the last change.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(events.String(), string(proto.StateCleanFailed)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for what, text := range map[string]string{
		"last_error (API)":    le,
		"last_error (stored)": derefString(stored.LastError),
		"history (API)":       stringOf(hist),
		"history (stored)":    storedEvents.String(),
		"/v1/events":          events.String(),
		"log":                 logs.String(),
	} {
		if strings.Contains(text, token) {
			t.Errorf("%s carries the agent token: %s", what, text)
		}
	}
	if !strings.Contains(events.String(), string(proto.StateCleanFailed)) {
		t.Errorf("/v1/events never showed the failure: %s", events.String())
	}
	for _, k := range []string{proto.InfoAgentToken, proto.InfoAgentURL} {
		if v, ok := stored.DriverInternalInfo[k]; ok {
			t.Errorf("driver_internal_info keeps %s = %v in %s", k, v, stored.ProvisionState)
		}
	}
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func stringOf(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			b.WriteString(x + "\n")
		}
	}
	walk(v)
	return b.String()
}
