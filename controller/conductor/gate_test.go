package conductor

import (
	"context"
	"testing"
	"time"
)

// waitersOf is how many wait at g in each class.
func waitersOf(g *writeGate) (agents, works int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.agents), len(g.works)
}

func freeOf(g *writeGate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.free
}

// until polls cond; the deadline is a safety net, not the verdict.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A slot that frees goes to the agent pass waiting, even one that came
// after a bulk pass's write; then to the bulk pass.
func TestWriteGateServesAgentPassesFirst(t *testing.T) {
	g := newWriteGate(1)
	work, agent := withPass(context.Background(), passWork), withPass(context.Background(), passAgent)
	done, err := g.enter(work) // the slot, held
	if err != nil {
		t.Fatal(err)
	}
	order, left := make(chan string, 2), make(chan struct{}, 2)
	goIn := func(ctx context.Context, name string) {
		go func() {
			leave, err := g.enter(ctx)
			if err != nil {
				order <- "error: " + err.Error()
				return
			}
			order <- name
			leave()
			left <- struct{}{}
		}()
	}
	goIn(work, "bulk")
	until(t, "the bulk write to wait", func() bool { _, w := waitersOf(g); return w == 1 })
	goIn(agent, "agent")
	until(t, "the agent write to wait", func() bool { a, _ := waitersOf(g); return a == 1 })
	done()
	if first, second := <-order, <-order; first != "agent" || second != "bulk" {
		t.Fatalf("slot went to %s then %s; want agent then bulk", first, second)
	}
	<-left
	<-left
	if free := freeOf(g); free != 1 {
		t.Errorf("%d free slots after everyone left, want 1", free)
	}
}

// A write waiting when its pass ends gives up its place; no slot is lost.
// Writes outside a pass (liveness, the scan) never wait.
func TestWriteGateCancelAndUngated(t *testing.T) {
	g := newWriteGate(1)
	done, err := g.enter(withPass(context.Background(), passWork))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(withPass(context.Background(), passAgent))
	errc := make(chan error, 1)
	go func() {
		_, err := g.enter(ctx)
		errc <- err
	}()
	until(t, "the agent write to wait", func() bool { a, _ := waitersOf(g); return a == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a write whose pass ended got a slot")
	}
	if a, w := waitersOf(g); a+w != 0 {
		t.Fatalf("%d writes still waiting after the cancel, want 0", a+w)
	}
	free, err := g.enter(context.Background()) // not a pass: through at once
	if err != nil {
		t.Fatal(err)
	}
	free()
	done()
	if free := freeOf(g); free != 1 {
		t.Errorf("%d free slots at the end, want 1", free)
	}
}
