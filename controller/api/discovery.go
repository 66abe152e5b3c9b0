package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/inspection"
	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Discovery enrolls machines no node knows when their agent reports an
// inspection (kiln serve --boot-unknown discovery), as Ironic's
// enroll-on-discovery does: a node in enroll with the inventory, its ports
// and its BMC address, then the inspection rules.
type Discovery struct {
	// Driver of new nodes before the rules run ("fake-hardware" when empty,
	// Ironic's [auto_discovery] default).
	Driver string
	// Rules run on every newcomer; nil: none.
	Rules *inspectrules.Set
}

// DefaultDiscoveryDriver is Ironic's default driver for discovered nodes.
const DefaultDiscoveryDriver = "fake-hardware"

// bmcAddressKey is where each hardware type keeps its BMC address; the
// discovered address goes there before the rules run.
var bmcAddressKey = map[string]string{"ipmi": "ipmi_address", "redfish": "redfish_address", "idrac-redfish": "redfish_address"}

// enrollDiscovered creates the node of a machine the inspection data does
// not match. It answers 202 with the new node's UUID; a machine whose data
// a rule refuses (fail action) is not enrolled (400, the rule's message).
func (s *Server) enrollDiscovered(c echo.Context, inv json.RawMessage, req map[string]json.RawMessage) error {
	ctx := c.Request().Context()
	sum, err := inspection.Summarize(inv)
	if err != nil {
		return badRequest("Invalid inventory: %v", err)
	}
	if len(sum.MACs) == 0 {
		return badRequest("Cannot enroll a discovered machine: its inventory has no interface with a valid MAC address")
	}
	var inventory map[string]any
	if err := json.Unmarshal(inv, &inventory); err != nil {
		return badRequest("Invalid inventory: %s", jsonErrorText(err))
	}
	plugin := map[string]any{}
	for k, v := range req {
		if k == "inventory" {
			continue
		}
		var x any
		if json.Unmarshal(v, &x) == nil {
			plugin[k] = x
		}
	}
	plugin["auto_discovered"] = true

	drv := s.discovery.Driver
	if drv == "" {
		drv = DefaultDiscoveryDriver
	}
	n := proto.Node{UUID: uuid.NewString(), Driver: drv, DriverInfo: proto.Dict{}, Properties: sum.Properties,
		Extra: proto.Dict{}, InstanceInfo: proto.Dict{}, DriverInternalInfo: proto.Dict{}, Traits: []string{}}
	if addr := bmcAddress(inventory); addr != "" {
		if key, ok := bmcAddressKey[drv]; ok {
			n.DriverInfo[key] = addr
		}
	}
	rules, err := s.rulesWith(ctx, s.discovery.Rules)
	if err != nil {
		return err
	}
	ran, err := rules.Apply(inspectrules.Env{Node: &n, Inventory: inventory, PluginData: plugin, Log: s.log})
	if err != nil {
		s.log.Warn("discovered machine not enrolled: an inspection rule refused it", "macs", sum.MACs, "err", err)
		return badRequest("The discovered machine was not enrolled: %v", err)
	}
	// A rule may have named another driver: only interfaces it left empty
	// take that driver's defaults, and whatever was set must be valid for it.
	if err := completeNode(&n); err != nil {
		return err
	}
	n.ProvisionState = proto.StateEnroll
	n.CreatedAt = proto.Now()
	if s.conductor != "" {
		cond := s.conductor
		n.Conductor = &cond
	}
	if err := s.store.CreateNode(ctx, &n); err != nil {
		return s.storeError(err, "Node", n.UUID)
	}
	for _, mac := range sum.MACs {
		p := proto.Port{UUID: uuid.NewString(), Address: mac, NodeUUID: n.UUID, PXEEnabled: sum.PXE == "" || mac == sum.PXE, AvailableForDynamicPortgroup: true,
			Extra: proto.Dict{}, InternalInfo: proto.Dict{}, LocalLinkConnection: proto.Dict{}}
		if err := s.store.CreatePort(ctx, &p); err != nil {
			// Another report of the same machine won the race: keep its node.
			_ = s.store.DeleteNode(ctx, n.UUID)
			if errors.Is(err, store.ErrDuplicateMAC) {
				if other, gerr := s.store.GetPortByAddress(ctx, mac); gerr == nil {
					return c.JSON(http.StatusAccepted, proto.InspectionResponse{UUID: other.NodeUUID})
				}
			}
			return s.storeError(err, "Port", mac)
		}
	}
	pluginJSON, err := json.Marshal(plugin)
	if err != nil {
		return err
	}
	if err := s.store.PutInventory(ctx, n.UUID, inv, pluginJSON); err != nil {
		return s.storeError(err, "Node", n.UUID)
	}
	event := fmt.Sprintf("Node enrolled by discovery with driver %s", n.Driver)
	if len(ran) > 0 {
		event += "; inspection rules applied: " + strings.Join(ran, ", ")
	}
	s.history(c, n.UUID, "INFO", event)
	s.log.Info("discovered machine enrolled", "node", n.UUID, "driver", n.Driver, "macs", sum.MACs, "rules", ran)
	s.notify(n.UUID)
	c.Response().Header().Set("Location", baseURL(c)+"/v1/nodes/"+n.UUID)
	return c.JSON(http.StatusAccepted, proto.InspectionResponse{UUID: n.UUID})
}

// bmcAddress is the BMC address the agent found (IPv4, else IPv6), or "".
func bmcAddress(inv map[string]any) string {
	for _, k := range []string{"bmc_address", "bmc_v6address"} {
		if a, _ := inv[k].(string); a != "" && a != "0.0.0.0" && a != "::/0" && a != "::" {
			return a
		}
	}
	return ""
}
