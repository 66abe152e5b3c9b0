// Package inspectrules runs operator-written inspection rules on a node and
// the inventory its agent reported, in the format of Ironic's inspection
// rules (2025.1): each rule has conditions over the node, the inventory and
// the plugin data, and actions that change the node when all conditions
// hold. Kiln reads them from a file given to `kiln serve --inspection-rules`
// (Ironic's "built-in rules" file) and applies them to every inspected node,
// machines enrolled by discovery included.
//
// The package is pure: Apply changes the values it is given and returns; the
// caller stores the result.
package inspectrules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits on a rules file: it is read at start and on every inspection, so
// a file that would make inspections slow is refused when loaded.
const (
	maxFileBytes = 1 << 20
	maxRules     = 1000
	maxOps       = 100 // conditions + actions of one rule
	maxLoop      = 1000
)

// Rule is one inspection rule.
type Rule struct {
	UUID        string `yaml:"uuid"`
	Description string `yaml:"description"`
	// Priority orders the rules: higher runs first; equal priorities run
	// in file order.
	Priority int `yaml:"priority"`
	// Sensitive rules are logged without their values (they usually carry
	// BMC credentials).
	Sensitive bool `yaml:"sensitive"`
	// Phase is "main", the only phase Ironic has.
	Phase      string `yaml:"phase"`
	Conditions []Op   `yaml:"conditions"`
	Actions    []Op   `yaml:"actions"`
}

// Op is one condition or action: an operator and its arguments, optionally
// repeated over Loop (with the current element as {item}).
type Op struct {
	Op string `yaml:"op"`
	// Args is a mapping of argument names to values, or (deprecated in
	// Ironic) a list given in the operator's argument order.
	Args any `yaml:"args"`
	Loop any `yaml:"loop"`
	// Multiple combines a looped condition's results: any (default), all,
	// first or last.
	Multiple string `yaml:"multiple"`

	name   string // Op without the "!" negation
	negate bool
	args   map[string]any // Args by name, checked against the operator
}

// Set is a loaded, checked rule set in the order it runs.
type Set struct {
	rules []Rule
}

// Len is the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// LoadFile reads and checks a rules file (YAML or JSON: a list of rules).
func LoadFile(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("inspection rules: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxFileBytes+1)); err != nil {
		return nil, fmt.Errorf("inspection rules %s: %w", path, err)
	}
	if buf.Len() > maxFileBytes {
		return nil, fmt.Errorf("inspection rules %s: larger than %d bytes", path, maxFileBytes)
	}
	s, err := Parse(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("inspection rules %s: %w", path, err)
	}
	return s, nil
}

// Parse checks a rules document: every operator known, every required
// argument present, no unknown argument, loops that are lists. Errors name
// the rule (by uuid or position) and the operator.
func Parse(doc []byte) (*Set, error) {
	var rules []Rule
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		if errors.Is(err, io.EOF) {
			return &Set{}, nil
		}
		return nil, fmt.Errorf("not a list of rules: %v", err)
	}
	if len(rules) > maxRules {
		return nil, fmt.Errorf("%d rules; at most %d", len(rules), maxRules)
	}
	seen := map[string]bool{}
	for i := range rules {
		r := &rules[i]
		where := fmt.Sprintf("rule %d", i+1)
		if r.UUID != "" {
			where = fmt.Sprintf("rule %d (%s)", i+1, r.UUID)
			if seen[r.UUID] {
				return nil, fmt.Errorf("%s: uuid used twice", where)
			}
			seen[r.UUID] = true
		}
		if err := checkRule(r, where); err != nil {
			return nil, err
		}
	}
	// Higher priority first; the file's order among equals.
	return &Set{rules: sortRules(rules)}, nil
}

// checkRule checks one rule's phase, its number of operations and each
// operation, preparing them to run; where names the rule in errors.
func checkRule(r *Rule, where string) error {
	if r.Phase != "" && r.Phase != "main" {
		return fmt.Errorf("%s: phase %q: only \"main\" exists", where, r.Phase)
	}
	if len(r.Actions) == 0 {
		return fmt.Errorf("%s: no actions", where)
	}
	if len(r.Conditions)+len(r.Actions) > maxOps {
		return fmt.Errorf("%s: %d conditions and actions; at most %d", where, len(r.Conditions)+len(r.Actions), maxOps)
	}
	for j := range r.Conditions {
		if err := r.Conditions[j].check(conditionArgs, true); err != nil {
			return fmt.Errorf("%s, condition %d: %w", where, j+1, err)
		}
	}
	for j := range r.Actions {
		if err := r.Actions[j].check(actionArgs, false); err != nil {
			return fmt.Errorf("%s, action %d: %w", where, j+1, err)
		}
	}
	return nil
}

// argSpec lists an operator's arguments in their positional order, the
// optional ones marked.
type argSpec struct {
	names    []string
	optional map[string]bool
}

func spec(names ...string) argSpec {
	s := argSpec{optional: map[string]bool{}}
	for _, n := range names {
		if opt, ok := strings.CutSuffix(n, "?"); ok {
			s.optional[opt] = true
			n = opt
		}
		s.names = append(s.names, n)
	}
	return s
}

var conditionArgs = map[string]argSpec{
	"eq":       spec("values", "force_strings?"),
	"lt":       spec("values", "force_strings?"),
	"gt":       spec("values", "force_strings?"),
	"is-empty": spec("value"),
	"in-net":   spec("address", "subnet"),
	"matches":  spec("value", "regex"),
	"contains": spec("value", "regex"),
	"one-of":   spec("value", "values"),
	"is-none":  spec("value"),
	"is-true":  spec("value"),
	"is-false": spec("value"),
}

var actionArgs = map[string]argSpec{
	"fail":               spec("msg"),
	"log":                spec("msg", "level?"),
	"set-attribute":      spec("path", "value"),
	"extend-attribute":   spec("path", "value", "unique?"),
	"del-attribute":      spec("path"),
	"set-capability":     spec("name", "value"),
	"unset-capability":   spec("name"),
	"add-trait":          spec("name"),
	"remove-trait":       spec("name"),
	"set-plugin-data":    spec("path", "value"),
	"extend-plugin-data": spec("path", "value", "unique?"),
	"unset-plugin-data":  spec("path"),
}

// refusedActions are Ironic actions Kiln does not run, with the reason.
var refusedActions = map[string]string{
	"api-call":              "rules make no outbound HTTP calls in Kiln (a rule file must not turn the controller into a request forwarder)",
	"set-port-attribute":    "port actions are not supported yet; set port fields through the API",
	"extend-port-attribute": "port actions are not supported yet; set port fields through the API",
	"del-port-attribute":    "port actions are not supported yet; set port fields through the API",
}

func (o *Op) check(specs map[string]argSpec, condition bool) error {
	name := strings.TrimSpace(o.Op)
	if rest, ok := strings.CutPrefix(name, "!"); ok {
		if !condition {
			return fmt.Errorf("%q: only conditions can be negated", o.Op)
		}
		o.negate = true
		name = strings.TrimSpace(rest)
	}
	o.name = name
	if why, ok := refusedActions[name]; ok && !condition {
		return fmt.Errorf("%q: %s", name, why)
	}
	sp, ok := specs[name]
	if !ok {
		kind := "action"
		if condition {
			kind = "condition"
		}
		return fmt.Errorf("unknown %s %q", kind, o.Op)
	}
	o.args = map[string]any{}
	switch a := o.Args.(type) {
	case map[string]any:
		for k, v := range a {
			if !slices.Contains(sp.names, k) {
				return fmt.Errorf("%s: unknown argument %q (it takes %s)", name, k, strings.Join(sp.names, ", "))
			}
			o.args[k] = v
		}
	case []any:
		// eq/lt/gt take *values: the whole list is the values.
		if sp.names[0] == "values" && len(sp.names) <= 2 && name != "one-of" {
			o.args["values"] = a
			break
		}
		if len(a) > len(sp.names) {
			return fmt.Errorf("%s: %d arguments; it takes %s", name, len(a), strings.Join(sp.names, ", "))
		}
		for i, v := range a {
			o.args[sp.names[i]] = v
		}
	case nil:
	default:
		return fmt.Errorf("%s: args must be a mapping (or a list)", name)
	}
	for _, n := range sp.names {
		if _, ok := o.args[n]; !ok && !sp.optional[n] {
			return fmt.Errorf("%s: argument %q is required", name, n)
		}
	}
	if v, ok := o.args["values"]; ok {
		if _, isList := v.([]any); !isList {
			if s, isStr := v.(string); !isStr || !strings.Contains(s, "{") {
				return fmt.Errorf("%s: values must be a list", name)
			}
		}
	}
	if o.Loop != nil {
		l, ok := o.Loop.([]any)
		if !ok {
			if s, isStr := o.Loop.(string); !isStr || !strings.Contains(s, "{") {
				return fmt.Errorf("%s: loop must be a list", name)
			}
		} else if len(l) > maxLoop {
			return fmt.Errorf("%s: loop of %d items; at most %d", name, len(l), maxLoop)
		}
	}
	switch o.Multiple {
	case "", "any", "all", "first", "last":
	default:
		return fmt.Errorf("%s: multiple must be any, all, first or last, not %q", name, o.Multiple)
	}
	if o.Multiple != "" && !condition {
		return fmt.Errorf("%s: multiple applies to conditions only", name)
	}
	return nil
}
