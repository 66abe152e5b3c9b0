package conductor_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/fakeagent"
)

// TestAbortFailsWithItsReason: the failed state and its last_error are one
// change. Every node write (the source of /v1/events and of what any GET can
// read) is observed; the first one that shows clean failed must already
// carry the abort's reason, and the CLI's --wait, which stops at that first
// event, then prints it rather than "failed".
func TestAbortFailsWithItsReason(t *testing.T) {
	var mu sync.Mutex
	var seen []events.Event
	c := startController(t, controllerOpts{observe: func(ch events.Change) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, ch.After)
	}})
	m := &machine{cfg: fakeagent.Config{StepBehavior: func(kind, step string, _ map[string]any) (any, error, time.Duration) {
		return nil, nil, time.Hour
	}}}
	uuid := c.enroll("node-abort-reason", "52:54:00:00:12:15", nil, m)
	c.provision(uuid, map[string]any{"target": "manage"})
	c.waitState(uuid, proto.StateManageable, 30*time.Second)
	c.provision(uuid, map[string]any{"target": "provide"})
	c.waitState(uuid, proto.StateCleanWait, 30*time.Second)
	c.provision(uuid, map[string]any{"target": "abort"})

	// The abort's answer has returned, so its write was observed.
	want := "Operation aborted by request while node was in clean wait"
	_, n := c.call("GET", "/v1/nodes/"+uuid, nil)
	if n["provision_state"] != string(proto.StateCleanFailed) {
		t.Fatalf("after abort: provision_state %v", n["provision_state"])
	}
	if le, _ := n["last_error"].(string); !strings.HasPrefix(le, want) {
		t.Errorf("first read in clean failed: last_error %q, want %q", le, want)
	}
	mu.Lock()
	defer mu.Unlock()
	var first *events.Event
	for i := range seen {
		if seen[i].UUID == uuid && seen[i].ProvisionState == proto.StateCleanFailed {
			first = &seen[i]
			break
		}
	}
	switch {
	case first == nil:
		t.Fatalf("no write showed clean failed among %d", len(seen))
	case first.LastError == nil || !strings.HasPrefix(*first.LastError, want):
		t.Errorf("first event in clean failed: last_error %v, want %q", first.LastError, want)
	}
}
