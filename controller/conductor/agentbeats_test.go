package conductor

import "testing"

func TestAgentBeats(t *testing.T) {
	var b agentBeats
	b.beat("n1") // nobody listens: nothing to keep
	ch := b.listen("n1")
	if len(ch) != 0 {
		t.Fatal("a heartbeat from before listening is kept")
	}
	b.beat("n2") // another node's heartbeat
	if len(ch) != 0 {
		t.Fatal("another node's heartbeat reached n1's listener")
	}
	b.beat("n1")
	b.beat("n1") // one pending signal at most: the beat never blocks
	if len(ch) != 1 {
		t.Fatalf("%d signals pending, want 1", len(ch))
	}
	<-ch
	b.stop("n1")
	b.beat("n1")
	if len(ch) != 0 || len(b.ch) != 0 {
		t.Fatalf("after stop: %d signals, %d listeners", len(ch), len(b.ch))
	}
	// A new wait starts without the old one's signals.
	b.beat("n1")
	if ch2 := b.listen("n1"); len(ch2) != 0 {
		t.Fatal("a new listener got an old signal")
	}
}
