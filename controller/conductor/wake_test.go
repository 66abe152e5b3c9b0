package conductor

import (
	"testing"
	"time"
)

// A wake queues its node once its time has come; a later wake for the same
// node replaces the earlier; stopping cancels what is pending.
func TestWakeQueuesTheNode(t *testing.T) {
	c := New(Config{Name: "c1"})
	c.wakeAt("node-a", time.Now().Add(time.Hour))
	c.wakeAt("node-a", time.Now().Add(-time.Second)) // replaces the hour
	select {
	case got := <-c.queue:
		if got != "node-a" {
			t.Fatalf("queued %q, want node-a", got)
		}
	case <-time.After(time.Minute): // a safety net only
		t.Fatal("the wake never queued the node")
	}
	if n := c.pendingWakes(); n != 0 {
		t.Errorf("%d wakes pending after the only one fired, want 0", n)
	}
	c.wakeAt("node-b", time.Now().Add(time.Hour))
	c.stopWakes()
	if n := c.pendingWakes(); n != 0 {
		t.Errorf("%d wakes pending after stop, want 0", n)
	}
}
