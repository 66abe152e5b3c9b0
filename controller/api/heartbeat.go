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

// decideHeartbeat judges an agent heartbeat against the node as seen: the
// keys of driver_internal_info to record (none when the heartbeat changes
// nothing, e.g. on an active node), whether the conductor must act, or the
// error the agent gets. It is pure so that the fast path (store.AgentOf +
// RecordAgent) and the fallback (UpdateNode) decide the same way.
func decideHeartbeat(v store.AgentView, hb *proto.HeartbeatRequest, now time.Time) (set []store.KeyValue, act bool, err error) {
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
	if !record {
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

// agentViewOf is n as decideHeartbeat sees it.
func agentViewOf(n *proto.Node) store.AgentView {
	v := store.AgentView{UUID: n.UUID, ProvisionState: n.ProvisionState, Maintenance: n.Maintenance, Reservation: n.Reservation}
	fs, _ := flowstate.Read(n, flowstate.PartAgent)
	v.Token, v.URL, v.HasURL = fs.Agent.Token, fs.Agent.URL, fs.Agent.URL != ""
	return v
}

// errUnchanged ends an UpdateNode whose heartbeat changes nothing: no write.
var errUnchanged = errors.New("heartbeat changes nothing")

// recordHeartbeat stores what decideHeartbeat decides: first as one
// conditional UPDATE of the node as seen (nothing at all when the heartbeat
// changes nothing); if the node changed meanwhile, by deciding again on the
// current node inside UpdateNode. It reports whether the conductor must act.
func (s *Server) recordHeartbeat(ctx context.Context, ident string, v store.AgentView, hb *proto.HeartbeatRequest) (bool, error) {
	set, act, err := decideHeartbeat(v, hb, time.Now())
	if err != nil || len(set) == 0 {
		return false, err
	}
	ok, err := s.store.RecordAgent(ctx, v, set, act)
	if err != nil || ok {
		return act, err
	}
	act = false
	_, err = s.store.UpdateNode(ctx, ident, func(n *proto.Node) error {
		set, a, err := decideHeartbeat(agentViewOf(n), hb, time.Now())
		if err != nil {
			return err
		}
		if len(set) == 0 {
			return errUnchanged
		}
		// The same change as the fast path's, made through the codec.
		now := time.Now()
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
