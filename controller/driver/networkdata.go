package driver

import (
	"encoding/json"
	"fmt"

	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/proto/nmstate"
)

// NetworkData is the NMState document a host without DHCP needs before its
// agent can reach the controller: driver_info.preprovisioning_network_data
// (Metal3's name; a string or an object), else network_data when it is
// NMState-shaped (has interfaces). nil when the node has none.
//
// The document is parsed as the agent will parse it, so that a mistake is
// reported here, naming the construct, instead of by a host that boots with
// no network and is never heard from.
func NetworkData(n *proto.Node) ([]byte, error) {
	var doc []byte
	src := "driver_info.preprovisioning_network_data"
	switch v := n.DriverInfo["preprovisioning_network_data"].(type) {
	case string:
		if v != "" {
			doc = []byte(v)
		}
	case map[string]any:
		doc, _ = json.Marshal(v)
	case nil:
	default:
		return nil, fmt.Errorf("%s: want an NMState document (YAML or JSON string, or an object), got %T", src, v)
	}
	if doc == nil {
		if _, ok := n.NetworkData["interfaces"]; !ok {
			return nil, nil
		}
		src = "network_data"
		doc, _ = json.Marshal(n.NetworkData)
	}
	if _, err := nmstate.Parse(doc); err != nil {
		return nil, fmt.Errorf("node %s %s: %w", n.UUID, src, err)
	}
	return doc, nil
}
