package decide

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/proto"
)

// applyInspectionRules runs the operator's inspection rules (the stored
// ones with the file's, in Ironic's order) on the node as the inspection
// leaves it (props merged) and its inventory. It returns the
// node as the rules made it (nil when no rule ran) and the actions that
// record their work: the plugin data they changed and a history event. A
// failing rule fails the inspection. Rules may not change a known node's
// driver or interfaces here: the conductor drives the node with them
// (discovery, where the node is new, applies rules before they are chosen).
func applyInspectionRules(in Input, props proto.Dict, ev InventoryRead) (*proto.Node, []Action, error) {
	raw, plugin := ev.Raw, ev.Plugin
	rules := inspectrules.Merge(ev.Rules, in.Config.InspectionRules)
	if rules.Len() == 0 {
		return nil, nil, nil
	}
	b, err := json.Marshal(in.Node)
	if err != nil {
		return nil, nil, err
	}
	var cp proto.Node
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, nil, err
	}
	if cp.Properties == nil {
		cp.Properties = proto.Dict{}
	}
	for k, v := range props {
		cp.Properties[k] = v
	}
	var inv map[string]any
	if err := json.Unmarshal(raw, &inv); err != nil {
		return nil, nil, fmt.Errorf("decode inventory for the inspection rules: %w", err)
	}
	pd := map[string]any{}
	if len(plugin) > 0 {
		if err := json.Unmarshal(plugin, &pd); err != nil || pd == nil {
			pd = map[string]any{}
		}
	}
	// The core does no I/O: the rules' log actions are dropped here, and
	// the rules that ran are recorded in the node's history instead.
	ran, err := rules.Apply(inspectrules.Env{Node: &cp, Inventory: inv, PluginData: pd, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, err
	}
	if len(ran) == 0 {
		return nil, nil, nil
	}
	if changed := inspectrules.DriverChanges(in.Node, &cp); len(changed) > 0 {
		return nil, nil, fmt.Errorf("inspection rules %v changed %v of a known node; set the driver and interfaces of enrolled nodes through the API", ran, changed)
	}
	pj, err := json.Marshal(pd)
	if err != nil {
		return nil, nil, err
	}
	return &cp, []Action{
		StoreInventory{Raw: raw, Plugin: pj},
		History{Severity: "INFO", Event: "Inspection rules applied: " + strings.Join(ran, ", ")},
	}, nil
}
