package decide

import (
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Waiting for the agent: the first heartbeat must come within the callback
// timeout, and a running agent may not stay silent longer than its heartbeat
// timeout; either fails the flow. Time is the input's Now.

func TestWaitTimeouts(t *testing.T) {
	cases := []struct {
		name      string
		updated   time.Duration // provision_updated_at before Now
		lastBeat  time.Duration // last heartbeat before Now; 0: none yet
		maint     bool
		wantError string
		lookedUp  time.Duration // token issued by lookup before Now; 0: none
	}{
		{"no heartbeat yet, within the callback timeout", 29 * time.Minute, 0, false, "", 0},
		{"no heartbeat within the callback timeout", 31 * time.Minute, 0, false, "Timeout reached while waiting for callback for node " + nodeID, 0},
		{"an agent heard from recently", 2 * time.Hour, 30 * time.Second, false, "", 0},
		{"an agent silent past its heartbeat timeout", 2 * time.Hour, 61 * time.Second, false, "The agent on node " + nodeID + " stopped heartbeating: last heartbeat 1m1s ago", 0},
		{"maintenance stops the clock", 2 * time.Hour, 0, true, "", 0},
		// A lookup whose answer was lost (the controller serving it died
		// after issuing the token) leaves an agent that cannot heartbeat:
		// the heartbeat timeout runs from the lookup, not the call-back
		// timeout from the boot.
		{"looked up, not heard from, past the call-back timeout", 31 * time.Minute, 0, false,
			"The agent on node " + nodeID + " looked up 1m1s ago and has not heartbeated since", 61 * time.Second},
		{"looked up recently", 5 * time.Minute, 0, false, "", 30 * time.Second},
		{"looked up, then heard from", 5 * time.Minute, 30 * time.Second, false, "", 10 * time.Minute},
		{"looked up, in maintenance", 5 * time.Minute, 0, true, "", 10 * time.Minute},
	}
	for _, w := range waits {
		for _, tc := range cases {
			t.Run(string(w.wait)+"/"+tc.name, func(t *testing.T) {
				n := node(w.wait, w.target)
				n.ProvisionUpdatedAt = &proto.Time{Time: t0.Add(-tc.updated)}
				n.Maintenance = tc.maint
				var s flowstate.State
				if tc.lastBeat != 0 {
					s.Agent = flowstate.Agent{URL: "http://192.0.2.10:9999", LastHeartbeat: t0.Add(-tc.lastBeat)}
				}
				if tc.lookedUp != 0 {
					s.Agent.Token, s.Agent.TokenIssued = "tok", t0.Add(-tc.lookedUp)
				}
				in := input(t, n, s, "direct")
				ev := Classify(in)
				if tc.wantError == "" {
					if ev != nil {
						t.Fatalf("event %#v, want none", ev)
					}
					return
				}
				to, ok := ev.(Timeout)
				if !ok {
					t.Fatalf("event %#v, want a timeout", ev)
				}
				got, _ := after(t, in, Step(in, to))
				wantState(t, got, w.failed, tc.wantError)
			})
		}
	}
}

// TestALostLookupBootsTheAgentAgain: within the call-back timeout, an
// agent that looked up and was never heard from is booted again (with its
// flow's kernel arguments), the wait going on, so that its next lookup
// gets a new token; the wait is found again by the scan after that.
func TestALostLookupBootsTheAgentAgain(t *testing.T) {
	for _, w := range waits {
		t.Run(string(w.wait), func(t *testing.T) {
			n := node(w.wait, w.target)
			n.ProvisionUpdatedAt = &proto.Time{Time: t0.Add(-5 * time.Minute)}
			s := flowstate.State{Agent: flowstate.Agent{Token: "tok", TokenIssued: t0.Add(-61 * time.Second)}}
			in := input(t, n, s, "direct")
			ev, ok := Classify(in).(Timeout)
			if !ok || !ev.Reboot {
				t.Fatalf("event %#v, want a timeout that reboots", Classify(in))
			}
			acts := Step(in, ev)
			want(t, acts, "history WARNING", "prepare ramdisk", "rebooting")
			_, inspect := find[PrepareRamdisk](t, acts).KernelArgs["ipa-inspection-callback-url"]
			if inspect != (w.wait == proto.StateInspectWait) {
				t.Errorf("inspection callback in the kernel args: %v, want %v", inspect, w.wait == proto.StateInspectWait)
			}
			got, fs := after(t, in, acts)
			wantState(t, got, w.wait, "")
			if fs.Agent.Token != "" || !fs.Agent.TokenIssued.IsZero() {
				t.Errorf("agent %+v: want the lost token wiped", fs.Agent)
			}
			if reason := TimeoutReason(Input{Node: got, State: fs, Now: in.Now, Config: in.Config}); reason != "" {
				t.Errorf("after the reboot the wait times out at once: %s", reason)
			}
		})
	}
}

func TestARecordedRequestGoesBeforeATimeout(t *testing.T) {
	in := aborted(t, proto.StateDeployWait, proto.StateActive)
	in.Node.ProvisionUpdatedAt = &proto.Time{Time: t0.Add(-time.Hour)}
	if _, ok := Classify(in).(OperatorRequest); !ok {
		t.Errorf("event %#v, want the request", Classify(in))
	}
}

func TestAStableNodeWithNothingRecordedHasNoEvent(t *testing.T) {
	for _, ps := range []proto.ProvisionState{proto.StateEnroll, proto.StateManageable, proto.StateAvailable, proto.StateActive, proto.StateDeployFailed} {
		if ev := Classify(input(t, node(ps, proto.NoState), flowstate.State{}, "direct")); ev != nil {
			t.Errorf("%s: event %#v, want none", ps, ev)
		}
	}
}

// The conductor is woken when a wait would expire, rather than only by its
// periodic scan: at the callback deadline on entering the wait, at the
// heartbeat deadline on each heartbeat.
func TestWaitsScheduleAWakeAtTheirDeadline(t *testing.T) {
	n, s := deployable(t)
	in := input(t, n, s, "direct")
	if w := find[Wake](t, Step(in, OperatorRequest{Request: *s.Request})); !w.At.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("wake at %v, want the callback deadline %v", w.At, t0.Add(30*time.Minute))
	}
	beat := t0.Add(-5 * time.Second)
	in = input(t, node(proto.StateCleanWait, proto.StateAvailable), withAgent(flowstate.State{HeartbeatPending: beat}), "direct")
	if w := find[Wake](t, Step(in, Classify(in))); !w.At.Equal(beat.Add(time.Minute)) {
		t.Errorf("wake at %v, want the heartbeat deadline %v", w.At, beat.Add(time.Minute))
	}
}
