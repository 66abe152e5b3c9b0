package conductor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/proto"
)

// ruledNode is what the inspection rules made of a node; nil n: no rule ran.
type ruledNode struct{ n *proto.Node }

// applyInspectionRules runs the operator's inspection rules on the node as
// the inspection leaves it (props merged) and the stored inventory. A
// failing rule fails the inspection; rule changes to the plugin data are
// stored. Rules may not change a known node's driver or interfaces here:
// the conductor is driving the node with them (discovery, where the node
// is new, applies rules before the driver is chosen).
func (f *flow) applyInspectionRules(ctx context.Context, props proto.Dict, raw, plugin json.RawMessage) (ruledNode, error) {
	rules := f.c.cfg.InspectionRules
	if rules.Len() == 0 {
		return ruledNode{}, nil
	}
	b, err := json.Marshal(f.n)
	if err != nil {
		return ruledNode{}, err
	}
	var cp proto.Node
	if err := json.Unmarshal(b, &cp); err != nil {
		return ruledNode{}, err
	}
	if cp.Properties == nil {
		cp.Properties = proto.Dict{}
	}
	for k, v := range props {
		cp.Properties[k] = v
	}
	var inv map[string]any
	if err := json.Unmarshal(raw, &inv); err != nil {
		return ruledNode{}, fmt.Errorf("decode inventory for the inspection rules: %w", err)
	}
	pd := map[string]any{}
	if len(plugin) > 0 {
		if err := json.Unmarshal(plugin, &pd); err != nil || pd == nil {
			pd = map[string]any{}
		}
	}
	ran, err := rules.Apply(inspectrules.Env{Node: &cp, Inventory: inv, PluginData: pd, Log: f.c.log})
	if err != nil {
		return ruledNode{}, err
	}
	if len(ran) == 0 {
		return ruledNode{}, nil
	}
	if changed := inspectrules.DriverChanges(f.n, &cp); len(changed) > 0 {
		return ruledNode{}, fmt.Errorf("inspection rules %v changed %v of a known node; set the driver and interfaces of enrolled nodes through the API", ran, changed)
	}
	if pj, err := json.Marshal(pd); err == nil {
		if err := f.c.st.PutInventory(ctx, f.n.UUID, raw, pj); err != nil {
			return ruledNode{}, fmt.Errorf("store plugin data the inspection rules changed: %w", err)
		}
	}
	f.c.log.Info("inspection rules applied", "node", f.n.UUID, "rules", ran)
	return ruledNode{&cp}, nil
}

// copyTo writes what the rules may change onto n (inside the update that
// ends the inspection).
func (r ruledNode) copyTo(n *proto.Node) {
	if r.n != nil {
		inspectrules.CopySettable(n, r.n)
	}
}
