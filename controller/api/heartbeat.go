package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// maxHeartbeatResolution bounds heartbeatResolution: how stale a recorded
// agent_last_heartbeat may be.
const maxHeartbeatResolution = 5 * time.Second

// heartbeatResolution is the resolution of agent_last_heartbeat for an
// agent given the heartbeat timeout: a heartbeat that repeats the recorded
// URL, version and CA within it of the recorded one, and gives the
// conductor nothing to do, is not written. A twentieth of the timeout, at
// most 5 s: the recorded time is then never more than that older than the
// agent's last heartbeat, so a node times out at worst that much early,
// while an agent heartbeats at least every 0.6 timeouts (ironic-python-
// agent's largest jitter).
func heartbeatResolution(timeout time.Duration) time.Duration {
	return min(timeout/20, maxHeartbeatResolution)
}

// decideHeartbeat judges an agent heartbeat against the node as seen: the
// keys of driver_internal_info to record (none when the heartbeat changes
// nothing, e.g. on an active node, or repeats the last recorded one within
// resolution), whether the conductor must act, or the error the agent
// gets. It is pure so that the fast path (store.AgentOf + RecordAgent) and
// the fallback (UpdateNode) decide the same way, on what the database
// holds: no controller's memory takes part, so several controllers agree.
func decideHeartbeat(v store.AgentView, hb *proto.HeartbeatRequest, now time.Time, resolution time.Duration) (set []store.KeyValue, act bool, err error) {
	if v.Token == "" || subtle.ConstantTimeCompare([]byte(v.Token), []byte(hb.AgentToken)) != 1 {
		return nil, false, badRequest("Invalid or missing agent token received.")
	}
	if v.URL != "" && v.URL != hb.CallbackURL {
		return nil, false, badRequest("Heartbeat from %s refused: node %s's agent is at %s (agent URLs are pinned until the agent is restarted)", hb.CallbackURL, v.UUID, v.URL)
	}
	if v.Reservation != nil && !v.HasURL {
		return nil, false, conflict("Node %s is locked by host %s, please retry after the current operation is completed.", v.UUID, *v.Reservation)
	}
	action := state.Heartbeat(v.ProvisionState, false, v.Maintenance)
	record := action != state.HeartbeatIgnore || v.ProvisionState == proto.StateInspectWait || v.ProvisionState == proto.StateInspecting
	if !record || action != state.HeartbeatAct && recordedRecently(v, hb, now, resolution) {
		return nil, false, nil
	}
	stamp := now.UTC().Format(time.RFC3339Nano)
	set = []store.KeyValue{
		{Key: proto.InfoAgentURL, Value: hb.CallbackURL},
		{Key: proto.InfoAgentVersion, Value: hb.AgentVersion},
		{Key: proto.InfoAgentLastHeartbeat, Value: stamp},
	}
	if hb.AgentVerifyCA != "" {
		set = append(set, store.KeyValue{Key: proto.InfoAgentVerifyCA, Value: hb.AgentVerifyCA})
	}
	if action == state.HeartbeatAct {
		set = append(set, store.KeyValue{Key: proto.InfoHeartbeatPending, Value: stamp})
		act = true
	}
	return set, act, nil
}

// recordedRecently reports whether the node already records what hb says,
// with a last heartbeat less than resolution ago (not in the future: a
// clock behind another controller's writes, as before).
func recordedRecently(v store.AgentView, hb *proto.HeartbeatRequest, now time.Time, resolution time.Duration) bool {
	if !v.HasURL || v.URL != hb.CallbackURL || v.Version != hb.AgentVersion || v.LastHeartbeat.IsZero() {
		return false
	}
	if hb.AgentVerifyCA != "" && hb.AgentVerifyCA != v.VerifyCA {
		return false
	}
	age := now.Sub(v.LastHeartbeat)
	return age >= 0 && age < resolution
}

// narrowHeartbeat reports whether set, what decideHeartbeat decided to
// record for hb, is only news that the agent is still there: nothing for
// the conductor (act false), and the node already records hb's URL,
// version and CA with an older last heartbeat. Such a heartbeat is
// recorded as a narrow stamp (store.RecordSeen), not by rewriting the
// node; any other keeps RecordAgent.
func narrowHeartbeat(v store.AgentView, hb *proto.HeartbeatRequest, set []store.KeyValue, act bool, now time.Time) bool {
	if len(set) == 0 || act || !v.HasURL || v.URL != hb.CallbackURL || v.Version != hb.AgentVersion || v.LastHeartbeat.IsZero() {
		return false
	}
	if hb.AgentVerifyCA != "" && hb.AgentVerifyCA != v.VerifyCA {
		return false
	}
	return now.After(v.LastHeartbeat)
}

// agentViewOf is n as decideHeartbeat sees it.
func agentViewOf(n *proto.Node) store.AgentView {
	v := store.AgentView{UUID: n.UUID, ProvisionState: n.ProvisionState, Maintenance: n.Maintenance, Reservation: n.Reservation}
	fs, _ := flowstate.Read(n, flowstate.PartAgent)
	v.Token, v.URL, v.HasURL = fs.Agent.Token, fs.Agent.URL, fs.Agent.URL != ""
	v.Version, v.VerifyCA, v.LastHeartbeat = fs.Agent.Version, fs.Agent.VerifyCA, fs.Agent.LastHeartbeat
	return v
}

// now is the time a heartbeat is judged and recorded at, to the
// microsecond: what a narrow stamp (store.RecordSeen) holds, so that both
// ways of recording a heartbeat show the same text.
func (s *Server) now() time.Time {
	if s.clock != nil {
		return s.clock().Truncate(time.Microsecond)
	}
	return time.Now().Truncate(time.Microsecond)
}

// errUnchanged ends an UpdateNode whose heartbeat changes nothing: no write.
var errUnchanged = errors.New("heartbeat changes nothing")

// recordHeartbeat stores what decideHeartbeat decides: first as one
// conditional UPDATE of the node as seen (nothing at all when the heartbeat
// changes nothing); if the node changed meanwhile, by deciding again on the
// current node inside UpdateNode. It reports whether the conductor must act.
func (s *Server) recordHeartbeat(ctx context.Context, ident string, v store.AgentView, hb *proto.HeartbeatRequest) (bool, error) {
	res := heartbeatResolution(s.agentHeartbeatTimeout)
	now := s.now()
	set, act, err := decideHeartbeat(v, hb, now, res)
	if err != nil || len(set) == 0 {
		return false, err
	}
	if act {
		// The agent waits for its next command (store.Urgent).
		ctx = store.Urgent(ctx)
	}
	var ok bool
	if narrowHeartbeat(v, hb, set, act, now) {
		ok, err = s.store.RecordSeen(ctx, v, now)
	} else {
		ok, err = s.store.RecordAgent(ctx, v, set, act)
	}
	if err != nil || ok {
		return act, err
	}
	act = false
	_, err = s.store.UpdateNode(ctx, ident, func(n *proto.Node) error {
		now := s.now()
		set, a, err := decideHeartbeat(agentViewOf(n), hb, now, res)
		if err != nil {
			return err
		}
		if len(set) == 0 {
			return errUnchanged
		}
		// The same change as the fast path's, made through the codec.
		fs, _ := flowstate.Read(n, flowstate.PartAgent|flowstate.PartWork)
		fs.Agent.URL, fs.Agent.Version, fs.Agent.LastHeartbeat = hb.CallbackURL, hb.AgentVersion, now
		if hb.AgentVerifyCA != "" {
			fs.Agent.VerifyCA = hb.AgentVerifyCA
		}
		if a {
			fs.HeartbeatPending = now
		}
		flowstate.Write(n, fs, flowstate.PartAgent|flowstate.PartWork)
		if a {
			n.ProvisionUpdatedAt = proto.Now()
		}
		act = a
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return false, nil
	}
	return act, err
}

// decodeHeartbeat decodes a heartbeat body whose fields checkFields
// allowed. Every field is a string: each is decoded alone, without the
// re-encoding decodeInto does; a value that is not a string takes
// decodeInto, for its error text.
func decodeHeartbeat(obj map[string]json.RawMessage) (*proto.HeartbeatRequest, error) {
	hb := new(proto.HeartbeatRequest)
	for k, raw := range obj {
		var dst *string
		switch k {
		case "callback_url":
			dst = &hb.CallbackURL
		case "agent_version":
			dst = &hb.AgentVersion
		case "agent_token":
			dst = &hb.AgentToken
		case "agent_verify_ca":
			dst = &hb.AgentVerifyCA
		case "agent_status":
			dst = &hb.AgentStatus
		case "agent_status_message":
			dst = &hb.AgentStatusMessage
		}
		if dst != nil && plainString(raw) {
			*dst = string(raw[1 : len(raw)-1])
			continue
		}
		if dst == nil || len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
			hb = new(proto.HeartbeatRequest)
			if err := decodeInto(obj, hb, "heartbeat"); err != nil {
				return nil, err
			}
			return hb, nil
		}
	}
	return hb, nil
}
