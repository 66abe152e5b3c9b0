package inspectrules

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// Env is what one run of the rules sees and changes.
type Env struct {
	// Node is changed in place by the actions, and only when every rule
	// succeeded.
	Node *proto.Node
	// Inventory is the agent's inventory as JSON decodes it.
	Inventory map[string]any
	// PluginData is the rest of the inspection data; the *-plugin-data
	// actions change it in place. Nil is allowed (then they make one).
	PluginData map[string]any
	Log        *slog.Logger
}

// Failure is what a rule's fail action, or a rule that cannot run, makes of
// an inspection.
type Failure struct {
	Rule string // uuid, or description, or position
	Msg  string
}

func (f *Failure) Error() string { return fmt.Sprintf("inspection rule %s: %s", f.Rule, f.Msg) }

// settable are the node attributes rules may change: what an operator sets
// when enrolling, never states, reservations or instance data.
var settable = map[string]bool{
	"name": true, "description": true, "driver": true, "driver_info": true, "properties": true,
	"extra": true, "resource_class": true, "conductor_group": true, "owner": true, "lessee": true,
	"shard": true, "automated_clean": true, "network_data": true, "parent_node": true,
}

// Apply runs the rules in order on env: each rule whose conditions all hold
// runs its actions. It returns the identities of the rules that ran. On a
// failure nothing of the node is changed.
func (s *Set) Apply(env Env) ([]string, error) {
	if s.Len() == 0 {
		return nil, nil
	}
	log := env.Log
	if log == nil {
		log = slog.Default()
	}
	raw, err := json.Marshal(env.Node)
	if err != nil {
		return nil, err
	}
	var node map[string]any
	if err := json.Unmarshal(raw, &node); err != nil {
		return nil, err
	}
	if env.PluginData == nil {
		env.PluginData = map[string]any{}
	}
	r := run{node: node, inventory: env.Inventory, plugin: env.PluginData, log: log}
	var ran []string
	for i := range s.rules {
		rule := &s.rules[i]
		id := ruleID(rule, i)
		r.rule, r.sensitive = id, rule.Sensitive
		ok, err := r.conditions(rule.Conditions)
		if err != nil {
			return ran, &Failure{Rule: id, Msg: err.Error()}
		}
		if !ok {
			continue
		}
		for j := range rule.Actions {
			if err := r.action(&rule.Actions[j]); err != nil {
				if f, isFail := err.(*Failure); isFail {
					return ran, f
				}
				return ran, &Failure{Rule: id, Msg: fmt.Sprintf("action %d (%s): %v", j+1, rule.Actions[j].name, err)}
			}
		}
		ran = append(ran, id)
		log.Info("inspection rule applied", "node", env.Node.UUID, "rule", id)
	}
	out, err := json.Marshal(node)
	if err != nil {
		return ran, err
	}
	var changed proto.Node
	if err := json.Unmarshal(out, &changed); err != nil {
		return ran, &Failure{Rule: "(all)", Msg: fmt.Sprintf("the rules left the node invalid: %v", err)}
	}
	*env.Node = changed
	return ran, nil
}

func ruleID(r *Rule, i int) string {
	switch {
	case r.UUID != "":
		return r.UUID
	case r.Description != "":
		return fmt.Sprintf("%d (%s)", i+1, r.Description)
	}
	return strconv.Itoa(i + 1)
}

// run is one application of a rule set.
type run struct {
	node, inventory, plugin map[string]any
	log                     *slog.Logger
	rule                    string
	sensitive               bool
}

func (r *run) vars(item any, looped bool) map[string]any {
	v := map[string]any{"node": r.node, "inventory": r.inventory, "plugin_data": r.plugin}
	if looped {
		v["item"] = item
	}
	return v
}

// items is an op's loop, or one round without an item.
func (r *run) items(o *Op) ([]any, bool, error) {
	if o.Loop == nil {
		return []any{nil}, false, nil
	}
	l := interpolate(o.Loop, r.vars(nil, false))
	list, ok := l.([]any)
	if !ok {
		return nil, false, fmt.Errorf("%s: loop is not a list after interpolation", o.name)
	}
	if len(list) > maxLoop {
		return nil, false, fmt.Errorf("%s: loop of %d items; at most %d", o.name, len(list), maxLoop)
	}
	return list, true, nil
}

func (r *run) conditions(conds []Op) (bool, error) {
	for i := range conds {
		c := &conds[i]
		items, looped, err := r.items(c)
		if err != nil {
			return false, err
		}
		var results []bool
		for _, it := range items {
			args := interpolate(c.args, r.vars(it, looped)).(map[string]any)
			ok, err := check(c.name, args)
			if err != nil {
				return false, fmt.Errorf("condition %d (%s): %v", i+1, c.name, err)
			}
			if c.negate {
				ok = !ok
			}
			results = append(results, ok)
			if c.Multiple == "first" {
				break
			}
		}
		var holds bool
		switch c.Multiple {
		case "all":
			holds = !slices.Contains(results, false)
		case "first":
			holds = results[0]
		case "last":
			holds = results[len(results)-1]
		default:
			holds = slices.Contains(results, true)
		}
		if !holds {
			return false, nil
		}
	}
	return true, nil
}

func check(op string, a map[string]any) (bool, error) {
	switch op {
	case "eq", "lt", "gt":
		vals, ok := a["values"].([]any)
		if !ok {
			return false, fmt.Errorf("values is not a list")
		}
		if truthy(a["force_strings"]) {
			for i := range vals {
				vals[i] = pyString(vals[i])
			}
		}
		for i := 1; i < len(vals); i++ {
			if op == "eq" {
				if !equal(vals[i-1], vals[i]) {
					return false, nil
				}
				continue
			}
			c, err := compare(vals[i-1], vals[i])
			if err != nil {
				return false, err
			}
			if (op == "lt" && c >= 0) || (op == "gt" && c <= 0) {
				return false, nil
			}
		}
		return true, nil
	case "is-empty":
		switch v := a["value"].(type) {
		case nil:
			return true, nil
		case string:
			return v == "", nil
		case []any:
			return len(v) == 0, nil
		case map[string]any:
			return len(v) == 0, nil
		}
		return false, nil
	case "is-none":
		return a["value"] == nil, nil
	case "is-true":
		return truthy(a["value"]), nil
	case "is-false":
		switch v := a["value"].(type) {
		case nil:
			return true, nil
		case bool:
			return !v, nil
		case string:
			s := strings.ToLower(strings.TrimSpace(v))
			return s == "no" || s == "false", nil
		}
		if f, ok := number(a["value"]); ok {
			return f == 0, nil
		}
		return false, nil
	case "in-net":
		subnet, err := netip.ParsePrefix(pyString(a["subnet"]))
		if err != nil {
			return false, fmt.Errorf("subnet %q is not a CIDR network", pyString(a["subnet"]))
		}
		addr, err := netip.ParseAddr(pyString(a["address"]))
		if err != nil {
			return false, nil // no address (no BMC) is not in any network
		}
		return subnet.Contains(addr.Unmap()), nil
	case "matches", "contains":
		expr := pyString(a["regex"])
		if op == "matches" {
			expr = `^(?:` + expr + `)$`
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return false, fmt.Errorf("regex %q: %v", pyString(a["regex"]), err)
		}
		if a["value"] == nil {
			return false, nil
		}
		return re.MatchString(pyString(a["value"])), nil
	case "one-of":
		vals, ok := a["values"].([]any)
		if !ok {
			return false, fmt.Errorf("values is not a list")
		}
		return slices.ContainsFunc(vals, func(v any) bool { return equal(v, a["value"]) }), nil
	}
	return false, fmt.Errorf("unknown condition %q", op)
}

func (r *run) action(o *Op) error {
	items, looped, err := r.items(o)
	if err != nil {
		return err
	}
	for _, it := range items {
		a := interpolate(o.args, r.vars(it, looped)).(map[string]any)
		if err := r.act(o.name, a); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) act(op string, a map[string]any) error {
	switch op {
	case "fail":
		return &Failure{Rule: r.rule, Msg: pyString(a["msg"])}
	case "log":
		level := slog.LevelInfo
		switch strings.ToLower(pyString(a["level"])) {
		case "debug":
			level = slog.LevelDebug
		case "warning", "warn":
			level = slog.LevelWarn
		case "error", "critical":
			level = slog.LevelError
		}
		msg := pyString(a["msg"])
		if r.sensitive {
			msg = "(sensitive rule: message not logged)"
		}
		r.log.Log(context.Background(), level, "inspection rule: "+msg, "rule", r.rule)
		return nil
	case "set-attribute", "extend-attribute", "del-attribute":
		keys, err := nodePath(pyString(a["path"]))
		if err != nil {
			return err
		}
		switch op {
		case "set-attribute":
			return setPath(r.node, keys, a["value"])
		case "extend-attribute":
			return extendPath(r.node, keys, a["value"], truthy(a["unique"]))
		}
		if len(keys) == 1 {
			r.node[keys[0]] = nil
			return nil
		}
		delPath(r.node, keys)
		return nil
	case "set-capability", "unset-capability":
		props, _ := r.node["properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
			r.node["properties"] = props
		}
		caps, order, err := capabilities(props["capabilities"])
		if err != nil {
			return err
		}
		name := pyString(a["name"])
		if name == "" || strings.ContainsAny(name, ":,") {
			return fmt.Errorf("capability name %q: must be non-empty, without ':' or ','", name)
		}
		if op == "set-capability" {
			val := pyString(a["value"])
			if strings.Contains(val, ",") {
				return fmt.Errorf("capability %s value %q: must not contain ','", name, val)
			}
			if _, ok := caps[name]; !ok {
				order = append(order, name)
			}
			caps[name] = val
		} else {
			delete(caps, name)
			order = slices.DeleteFunc(order, func(k string) bool { return k == name })
		}
		parts := make([]string, 0, len(order))
		for _, k := range order {
			parts = append(parts, k+":"+caps[k])
		}
		props["capabilities"] = strings.Join(parts, ",")
		return nil
	case "add-trait", "remove-trait":
		name := pyString(a["name"])
		traits, _ := r.node["traits"].([]any)
		has := slices.ContainsFunc(traits, func(t any) bool { return t == name })
		if op == "add-trait" {
			if !has {
				traits = append(traits, name)
			}
		} else {
			traits = slices.DeleteFunc(traits, func(t any) bool { return t == name })
		}
		if traits == nil {
			traits = []any{}
		}
		r.node["traits"] = traits
		return nil
	case "set-plugin-data", "extend-plugin-data", "unset-plugin-data":
		keys := splitPath(pyString(a["path"]))
		if len(keys) == 0 {
			return fmt.Errorf("empty plugin data path")
		}
		switch op {
		case "set-plugin-data":
			return setPath(r.plugin, keys, a["value"])
		case "extend-plugin-data":
			return extendPath(r.plugin, keys, a["value"], truthy(a["unique"]))
		}
		delPath(r.plugin, keys)
		return nil
	}
	return fmt.Errorf("unknown action %q", op)
}

// nodePath splits a node attribute path ("/driver_info/ipmi_address" or
// "driver_info.ipmi_address") and checks that rules may set it.
func nodePath(p string) ([]string, error) {
	keys := splitPath(p)
	if len(keys) == 0 {
		return nil, fmt.Errorf("empty attribute path")
	}
	top := keys[0]
	if !settable[top] && !strings.HasSuffix(top, "_interface") {
		return nil, fmt.Errorf("node attribute %q cannot be set by an inspection rule", top)
	}
	return keys, nil
}

func splitPath(p string) []string {
	p = strings.Trim(strings.TrimSpace(p), "/")
	if p == "" {
		return nil
	}
	if strings.Contains(p, "/") {
		return strings.Split(p, "/")
	}
	return strings.Split(p, ".")
}

func setPath(m map[string]any, keys []string, v any) error {
	for i, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			if m[k] != nil {
				return fmt.Errorf("%s is not a dictionary", strings.Join(keys[:i+1], "/"))
			}
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
	return nil
}

func extendPath(m map[string]any, keys []string, v any, unique bool) error {
	cur := lookup(m, keys)
	list, ok := cur.([]any)
	if !ok && cur != nil {
		return fmt.Errorf("%s is not a list", strings.Join(keys, "/"))
	}
	if unique && slices.ContainsFunc(list, func(x any) bool { return equal(x, v) }) {
		return nil
	}
	return setPath(m, keys, append(list, v))
}

func delPath(m map[string]any, keys []string) {
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	delete(m, keys[len(keys)-1])
}

func lookup(m map[string]any, keys []string) any {
	var cur any = m
	for _, k := range keys {
		d, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = d[k]
	}
	return cur
}

// capabilities reads properties/capabilities in either of Ironic's forms:
// "k1:v1,k2:v2" or a dictionary. The keys come back in their order.
func capabilities(v any) (map[string]string, []string, error) {
	caps := map[string]string{}
	var order []string
	switch c := v.(type) {
	case nil:
	case string:
		for _, kv := range strings.Split(c, ",") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			k, val, ok := strings.Cut(kv, ":")
			if !ok {
				return nil, nil, fmt.Errorf("properties/capabilities %q: %q is not key:value", c, kv)
			}
			if _, dup := caps[k]; !dup {
				order = append(order, k)
			}
			caps[k] = val
		}
	case map[string]any:
		for k := range c {
			order = append(order, k)
		}
		slices.Sort(order)
		for _, k := range order {
			caps[k] = pyString(c[k])
		}
	default:
		return nil, nil, fmt.Errorf("properties/capabilities is neither a string nor a dictionary")
	}
	return caps, order, nil
}

func truthy(v any) bool {
	switch t := v.(type) {
	case bool:
		return t
	case string:
		s := strings.ToLower(strings.TrimSpace(t))
		return s == "yes" || s == "true"
	}
	if f, ok := number(v); ok {
		return f != 0
	}
	return false
}

func number(v any) (float64, bool) {
	switch t := v.(type) {
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case uint64:
		return float64(t), true
	case float64:
		return t, true
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	}
	return 0, false
}

func equal(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(normalize(a), normalize(b))
}

func normalize(v any) any {
	switch t := v.(type) {
	case []any:
		out := make([]any, len(t))
		for i := range t {
			out[i] = normalize(t[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = normalize(x)
		}
		return out
	}
	if f, ok := number(v); ok {
		return f
	}
	return v
}

func compare(a, b any) (int, error) {
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			switch {
			case fa < fb:
				return -1, nil
			case fa > fb:
				return 1, nil
			}
			return 0, nil
		}
	}
	sa, aok := a.(string)
	sb, bok := b.(string)
	if aok && bok {
		return strings.Compare(sa, sb), nil
	}
	return 0, fmt.Errorf("cannot order %s and %s", pyString(a), pyString(b))
}

// pyString renders a value as Python's str() does, since rule authors
// write their comparisons against Ironic's rendering.
func pyString(v any) string {
	switch t := v.(type) {
	case nil:
		return "None"
	case string:
		return t
	case bool:
		if t {
			return "True"
		}
		return "False"
	case float64:
		if t == float64(int64(t)) && t < 1e15 && t > -1e15 {
			return strconv.FormatInt(int64(t), 10)
		}
		return strconv.FormatFloat(t, 'g', -1, 64)
	case int:
		return strconv.Itoa(t)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
