package nodework_test

import (
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/nodework"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

var t0 = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)

func node(s proto.ProvisionState, edit func(n *proto.Node)) *proto.Node {
	n := &proto.Node{UUID: "u1", ProvisionState: s, DriverInternalInfo: proto.Dict{}, ProvisionUpdatedAt: &proto.Time{Time: t0}}
	if edit != nil {
		edit(n)
	}
	return n
}

func flow(fn func(s *flowstate.State)) func(n *proto.Node) {
	return func(n *proto.Node) { flowstate.Update(n, fn) }
}

func TestNow(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *proto.Node
		want bool
	}{
		{"an idle active node", node(proto.StateActive, nil), false},
		{"a node waiting for its agent", node(proto.StateDeployWait, nil), false},
		{"a failed node", node(proto.StateDeployFailed, nil), false},
		{"a recorded provision request", node(proto.StateManageable, flow(func(s *flowstate.State) { s.Request = &flowstate.Request{Verb: "provide"} })), true},
		{"a heartbeat to act on", node(proto.StateCleanWait, flow(func(s *flowstate.State) { s.HeartbeatPending = t0 })), true},
		{"a boot device to set", node(proto.StateActive, flow(func(s *flowstate.State) { s.BootDevicePending = true })), true},
		{"an inventory delivered", node(proto.StateInspectWait, flow(func(s *flowstate.State) { s.InspectionPending = true })), true},
		{"a management request", node(proto.StateActive, flow(func(s *flowstate.State) { s.ManagementRequest = &proto.ManagementRequest{} })), true},
		{"a power change", node(proto.StateActive, func(n *proto.Node) { p := proto.PowerOff; n.TargetPowerState = &p }), true},
		{"a flow interrupted between steps", node(proto.StateDeploying, nil), true},
	} {
		if got := nodework.Now(tc.node); got != tc.want {
			t.Errorf("%s: Now = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWaitOf(t *testing.T) {
	heard := flow(func(s *flowstate.State) { s.Agent.LastHeartbeat = t0.Add(time.Minute) })
	for _, tc := range []struct {
		name string
		node *proto.Node
		want nodework.Wait
	}{
		{"not a wait", node(proto.StateActive, heard), nodework.Wait{}},
		{"a wait without a heartbeat runs from its start", node(proto.StateCleanWait, nil), nodework.Wait{Since: t0}},
		{"a wait with a heartbeat runs from it", node(proto.StateDeployWait, heard), nodework.Wait{LastHeartbeat: t0.Add(time.Minute)}},
		{"a wait looked up, not heard from, runs from the lookup", node(proto.StateDeployWait, flow(func(s *flowstate.State) {
			s.Agent.Token, s.Agent.TokenIssued = "tok", t0.Add(2*time.Minute)
		})), nodework.Wait{LastHeartbeat: t0.Add(2 * time.Minute)}},
		{"maintenance never times out", node(proto.StateDeployWait, func(n *proto.Node) { n.Maintenance = true }), nodework.Wait{}},
		{"no start recorded", node(proto.StateRescueWait, func(n *proto.Node) { n.ProvisionUpdatedAt = nil }), nodework.Wait{}},
	} {
		if got := nodework.WaitOf(tc.node); !got.LastHeartbeat.Equal(tc.want.LastHeartbeat) || !got.Since.Equal(tc.want.Since) {
			t.Errorf("%s: WaitOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestAgreesWithDecide: the store's columns select a wait exactly when the
// decision core would time it out, given the same clock and timeouts.
func TestAgreesWithDecide(t *testing.T) {
	cfg := decide.Config{CallbackTimeout: 30 * time.Minute, AgentHeartbeatTimeout: time.Minute}
	for _, s := range state.States() {
		if nodework.IsWait(s) != decide.IsWait(s) {
			t.Errorf("%q: nodework.IsWait %v, decide.IsWait %v", s, nodework.IsWait(s), decide.IsWait(s))
		}
		for _, edit := range []func(n *proto.Node){nil, flow(func(st *flowstate.State) { st.Agent.LastHeartbeat = t0 }),
			flow(func(st *flowstate.State) { st.Agent.Token, st.Agent.TokenIssued = "tok", t0.Add(30*time.Minute) }),
			func(n *proto.Node) { n.Maintenance = true }} {
			n := node(s, edit)
			fs, _ := flowstate.Of(n)
			w := nodework.WaitOf(n)
			for _, now := range []time.Time{t0.Add(59 * time.Second), t0.Add(61 * time.Second), t0.Add(31 * time.Minute)} {
				timedOut := decide.TimeoutReason(decide.Input{Node: n, State: fs, Now: now, Config: cfg}) != ""
				selected := (!w.LastHeartbeat.IsZero() && w.LastHeartbeat.Before(now.Add(-cfg.AgentHeartbeatTimeout))) ||
					(!w.Since.IsZero() && w.Since.Before(now.Add(-cfg.CallbackTimeout)))
				if timedOut != selected {
					t.Errorf("%q (maintenance %v) at +%s: decide times out %v, the columns select %v", s, n.Maintenance, now.Sub(t0), timedOut, selected)
				}
			}
		}
	}
}
