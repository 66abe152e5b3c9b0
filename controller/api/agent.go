package api

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// The agent side of the API (spec §3): lookup, heartbeat and the inspection
// callback. These record what the agent says and wake the conductor; the
// conductor acts.

func (s *Server) notify(uuid string) {
	if s.notifier != nil {
		s.notifier(uuid)
	}
}

// notifyHeartbeat wakes the conductor for an agent waiting on it.
func (s *Server) notifyHeartbeat(uuid string) {
	if s.notifyAgent != nil {
		s.notifyAgent(uuid)
		return
	}
	s.notify(uuid)
}

// lookupDoc is the answer to GET /v1/lookup and, from 1.84, to
// continue_inspection.
func (s *Server) lookupDoc(c echo.Context, n *proto.Node, token string) proto.LookupResponse {
	m := maskedNode(n)
	return proto.LookupResponse{
		Node: proto.LookupNode{
			UUID: n.UUID, Properties: m.Properties, InstanceInfo: m.InstanceInfo,
			DriverInternalInfo: m.DriverInternalInfo,
			Links:              []proto.AgentLink{{Href: baseURL(c) + "/v1/nodes/" + n.UUID, Rel: "self"}},
		},
		Config: proto.LookupConfig{
			HeartbeatTimeout:   int(s.agentHeartbeatTimeout / time.Second),
			AgentToken:         token,
			AgentTokenRequired: true,
			ImmediateHeartbeat: true,
		},
	}
}

// giveToken gives n an agent token if it has none and returns what the agent
// may see: the token the first time, "******" afterwards. Callers run it
// inside the node's atomic update, so that a token can never be added after
// the conductor has finished the node and wiped the agent's keys.
func giveToken(n *proto.Node) string {
	fs, _ := flowstate.Read(n, flowstate.PartAgent)
	if fs.Agent.Token != "" || tokenOnBootMedia(n) {
		return proto.MaskedToken
	}
	t := agentclient.NewToken()
	fs.Agent.Token, fs.Agent.TokenIssued = t, time.Now()
	flowstate.Write(n, fs, flowstate.PartAgent)
	return t
}

// issueToken gives the node a token if it is still in a state that accepts a
// lookup.
func (s *Server) issueToken(c echo.Context, uuid string) (*proto.Node, string, error) {
	var token string
	n, err := s.store.UpdateNode(c.Request().Context(), uuid, func(n *proto.Node) error {
		if !state.LookupAllowed(n.ProvisionState, false) {
			// It left the states that accept an agent since it was read.
			return notFound("Resource could not be found.")
		}
		token = giveToken(n)
		return nil
	})
	return n, token, err
}

func (s *Server) lookup(c echo.Context) error {
	if minor(c) < 22 {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	if err := s.guardAgentCall(c, "lookup"); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var macs []string
	for _, a := range strings.Split(c.QueryParam("addresses"), ",") {
		if hw, err := net.ParseMAC(strings.TrimSpace(a)); err == nil && len(hw) == 6 {
			macs = append(macs, strings.ToLower(hw.String()))
		}
	}
	nodeUUID := c.QueryParam("node_uuid")
	if len(macs) == 0 && nodeUUID == "" {
		return badRequest("Either node_uuid or a valid MAC address in addresses is required for lookup")
	}
	var n *proto.Node
	if nodeUUID != "" {
		if got, err := s.store.GetNode(ctx, nodeUUID); err == nil {
			n = got
		}
	}
	for _, mac := range macs {
		if n != nil {
			break
		}
		if p, err := s.store.GetPortByAddress(ctx, mac); err == nil {
			if got, err := s.store.GetNode(ctx, p.NodeUUID); err == nil {
				n = got
			}
		}
	}
	if n == nil || !state.LookupAllowed(n.ProvisionState, false) {
		return notFound("Resource could not be found.")
	}
	if fs, _ := flowstate.Read(n, flowstate.PartAgent); fs.Agent.Token != "" || tokenOnBootMedia(n) {
		// The token was issued already: the answer masks it and nothing
		// changes, so there is nothing to write.
		return c.JSON(http.StatusOK, s.lookupDoc(c, n, proto.MaskedToken))
	}
	n, token, err := s.issueToken(c, n.UUID)
	if err != nil {
		return s.storeError(err, "Node", nodeUUID)
	}
	if token != proto.MaskedToken {
		s.recordTokenClaim(c, n.UUID, "lookup")
	}
	return c.JSON(http.StatusOK, s.lookupDoc(c, n, token))
}

var heartbeatFields = []string{"callback_url", "agent_version", "agent_token", "agent_verify_ca", "agent_status", "agent_status_message"}

func (s *Server) heartbeat(c echo.Context) error {
	if minor(c) < 22 {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	obj, ok := stringObject(body)
	if !ok {
		if obj, err = jsonObject(body, "heartbeat"); err != nil {
			return err
		}
	}
	if err := checkFields(c, "heartbeat", obj, heartbeatFields, map[string]int{"agent_token": 62, "agent_verify_ca": 68, "agent_status": 72, "agent_status_message": 72}); err != nil {
		return err
	}
	hb, err := decodeHeartbeat(obj)
	if err != nil {
		return err
	}
	ident := c.Param("node")
	ctx := c.Request().Context()
	view, err := s.store.AgentOf(ctx, ident)
	if err != nil {
		return s.storeError(err, "Node", ident)
	}
	if hb.AgentVersion == "" {
		return badRequest("Agent did not transmit a version, and a version is required. Please update the agent being used.")
	}
	if hb.AgentToken == "" {
		return badRequest("Agent token is required for heartbeat processing.")
	}
	if hb.CallbackURL == "" {
		return badRequest("callback_url is required for heartbeat processing.")
	}
	if u, err := url.Parse(hb.CallbackURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return badRequest("Invalid callback_url %q: expected http(s)://host:port", hb.CallbackURL)
	}
	if hb.AgentVerifyCA != "" && !strings.HasPrefix(hb.CallbackURL, "https://") {
		hb.CallbackURL = "https://" + strings.TrimPrefix(hb.CallbackURL, "http://")
	}
	act, err := s.recordHeartbeat(ctx, ident, view, hb)
	if err != nil {
		return s.storeError(err, "Node", ident)
	}
	if s.agentHeartbeated != nil {
		s.agentHeartbeated(view.UUID)
	}
	if act {
		s.notifyHeartbeat(view.UUID)
	}
	return c.NoContent(http.StatusAccepted)
}

// continueInspection takes the inventory an agent collected.
func (s *Server) continueInspection(c echo.Context) error {
	if err := s.guardAgentCall(c, "continue_inspection"); err != nil {
		return err
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		return badRequest("Invalid inspection data: expected a JSON object")
	}
	inv := req["inventory"]
	if len(inv) == 0 || inv[0] != '{' {
		return badRequest("Invalid inspection data: \"inventory\" must be an object")
	}
	var parsed struct {
		Interfaces []struct {
			Name       string `json:"name"`
			MACAddress string `json:"mac_address"`
			IPv4       string `json:"ipv4_address"`
		} `json:"interfaces"`
		Boot struct {
			PXEInterface string `json:"pxe_interface"`
		} `json:"boot"`
	}
	if err := json.Unmarshal(inv, &parsed); err != nil {
		return badRequest("Invalid inventory: %s", jsonErrorText(err))
	}
	ctx := c.Request().Context()
	var n *proto.Node
	if u := c.QueryParam("node_uuid"); u != "" {
		if got, err := s.store.GetNode(ctx, u); err == nil {
			n = got
		}
	}
	pxe := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(parsed.Boot.PXEInterface, "01-"), "-", ":"))
	allIfaces := map[string]any{}
	for _, i := range parsed.Interfaces {
		mac := strings.ToLower(i.MACAddress)
		allIfaces[i.Name] = map[string]any{"name": i.Name, "mac_address": mac, "ip": i.IPv4, "pxe_enabled": pxe == "" || mac == pxe || i.Name == parsed.Boot.PXEInterface}
		if n == nil {
			if p, err := s.store.GetPortByAddress(ctx, mac); err == nil {
				if got, err := s.store.GetNode(ctx, p.NodeUUID); err == nil {
					n = got
				}
			}
		}
	}
	if n == nil && s.discovery != nil && c.QueryParam("node_uuid") == "" {
		return s.enrollDiscovered(c, inv, req)
	}
	if n == nil {
		return notFound("No node matches the inspection data (node_uuid or the MACs of its interfaces)")
	}
	if n.ProvisionState != proto.StateInspectWait && n.ProvisionState != proto.StateInspecting {
		return badRequest("Node %s is in state %s; inspection data is only accepted in inspect wait", n.UUID, n.ProvisionState)
	}
	plugin := map[string]json.RawMessage{}
	for k, v := range req {
		if k != "inventory" {
			plugin[k] = v
		}
	}
	ai, _ := json.Marshal(allIfaces)
	plugin["all_interfaces"] = ai
	pluginJSON, _ := json.Marshal(plugin)
	if err := s.store.PutInventory(ctx, n.UUID, inv, pluginJSON); err != nil {
		return s.storeError(err, "Node", n.UUID)
	}
	token := ""
	uuid := n.UUID
	n, err = s.store.UpdateNode(ctx, uuid, func(n *proto.Node) error {
		if n.ProvisionState != proto.StateInspectWait && n.ProvisionState != proto.StateInspecting {
			return badRequest("Node %s is in state %s; inspection data is only accepted in inspect wait", n.UUID, n.ProvisionState)
		}
		flowstate.Update(n, func(s *flowstate.State) { s.InspectionPending = true })
		if minor(c) >= 84 {
			// Before the conductor is woken: it wipes the token when it
			// finishes the inspection.
			token = giveToken(n)
		}
		return nil
	})
	if err != nil {
		return s.storeError(err, "Node", uuid)
	}
	if token != "" && token != proto.MaskedToken {
		s.recordTokenClaim(c, n.UUID, "continue_inspection")
	}
	s.notify(n.UUID)
	if minor(c) >= 84 {
		doc := s.lookupDoc(c, n, token)
		return c.JSON(http.StatusAccepted, proto.InspectionResponse{Node: &doc.Node, Config: &doc.Config})
	}
	return c.JSON(http.StatusAccepted, proto.InspectionResponse{UUID: n.UUID})
}
