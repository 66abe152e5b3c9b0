package conductor

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestWakePayloadRoundTrip(t *testing.T) {
	in := []peerWake{
		{uuid: "9b3dce9c-e1fb-459b-9ab9-4c52cf033e6b", lane: laneAgent},
		{uuid: "8ac8969f-f89e-437a-b48f-fd2d285faa37", lane: laneWork},
	}
	payload := encodeWake(in[0]) + encodeWake(in[1])
	var got []string
	decodeWakes(payload, func(uuid string, l lane) { got = append(got, fmt.Sprint(uuid, l)) })
	want := []string{fmt.Sprint(in[0].uuid, laneAgent), fmt.Sprint(in[1].uuid, laneWork)}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("decoded %v, want %v", got, want)
	}
}

func TestWakePayloadSkipsWhatIsNotOurs(t *testing.T) {
	for _, payload := range []string{"", "\n\n", "x123", "a", "w", "z" + strings.Repeat("1", 36), "a" + strings.Repeat("1", 65)} {
		decodeWakes(payload, func(uuid string, l lane) {
			t.Errorf("payload %q: decoded %q lane %d", payload, uuid, l)
		})
	}
}

// forward sends nothing without a Waker, and nothing for a node this
// conductor owns (Notify queued it locally).
func TestForwardOnlyToAnotherOwner(t *testing.T) {
	c := New(Config{Name: "c1"})
	c.forward("9b3dce9c-e1fb-459b-9ab9-4c52cf033e6b", laneAgent) // no Peers: no queue at all
	c = New(Config{Name: "c1", Peers: nopWaker{}})
	c.ring = NewRing([]string{"c1", "c2"})
	var mine, theirs []string
	for i := range 64 {
		u := fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
		if c.owns(u) {
			mine = append(mine, u)
		} else {
			theirs = append(theirs, u)
		}
		c.NotifyAgent(u)
	}
	if len(mine) == 0 || len(theirs) == 0 {
		t.Fatalf("ring gave c1 %d and c2 %d of 64 nodes", len(mine), len(theirs))
	}
	if len(c.peerWakes) != len(theirs) {
		t.Fatalf("%d wake-ups queued for peers, want %d", len(c.peerWakes), len(theirs))
	}
	for _, u := range theirs {
		w := <-c.peerWakes
		if w.owner != "c2" || w.uuid != u || w.lane != laneAgent {
			t.Errorf("queued %+v, want c2 %s agent lane", w, u)
		}
	}
	if len(c.agents) != len(mine) {
		t.Errorf("%d nodes queued locally, want %d", len(c.agents), len(mine))
	}
}

type nopWaker struct{}

func (nopWaker) Wake(context.Context, string, string) error { return nil }
func (nopWaker) Listen(ctx context.Context, _ string, _ func(), _ func(string)) error {
	<-ctx.Done()
	return ctx.Err()
}
