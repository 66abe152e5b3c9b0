package inspectrules

import (
	"encoding/json"
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/kilnhq/kiln/proto"
)

// Rules stored through the API (/v1/inspection_rules) are checked by the
// same rules as a file's, and run together with the file's.

// MaxPriority bounds a stored rule's priority, as Ironic bounds user rules
// (a rules file, Ironic's built-in rules, may use any).
const MaxPriority = 9999

// Check checks one rule as the API received it; the error names the
// condition or action at fault and why.
func Check(r proto.InspectionRule) error {
	rule, err := fromProto(r)
	if err != nil {
		return err
	}
	return checkRule(&rule, "rule")
}

// FromStored makes a set of stored rules, kept in the order given (the
// store's) among equal priorities.
func FromStored(rules []proto.InspectionRule) (*Set, error) {
	out := make([]Rule, 0, len(rules))
	for _, r := range rules {
		rule, err := fromProto(r)
		if err != nil {
			return nil, fmt.Errorf("stored rule %s: %w", r.UUID, err)
		}
		if err := checkRule(&rule, "stored rule "+r.UUID); err != nil {
			return nil, err
		}
		out = append(out, rule)
	}
	return &Set{rules: sortRules(out)}, nil
}

// Merge is the rules of stored and file in the order Ironic runs them:
// higher priority first and, among equals, the stored rules before the
// file's (Ironic appends its built-in rules to the database's and sorts
// stably). Either may be nil.
func Merge(stored, file *Set) *Set {
	if stored.Len() == 0 {
		return file
	}
	if file.Len() == 0 {
		return stored
	}
	all := slices.Concat(stored.rules, file.rules)
	return &Set{rules: sortRules(all)}
}

func sortRules(rules []Rule) []Rule {
	slices.SortStableFunc(rules, func(a, b Rule) int { return b.Priority - a.Priority })
	return rules
}

// fromProto converts an API rule to the file format's: arguments and loops
// decoded as YAML decodes them (integers as int), an empty loop none.
func fromProto(r proto.InspectionRule) (Rule, error) {
	rule := Rule{UUID: r.UUID, Priority: r.Priority, Sensitive: r.Sensitive, Phase: r.Phase}
	if r.Description != nil {
		rule.Description = *r.Description
	}
	for i, c := range r.Conditions {
		args, loop, err := plain(c.Args, c.Loop)
		if err != nil {
			return rule, fmt.Errorf("condition %d: %w", i+1, err)
		}
		rule.Conditions = append(rule.Conditions, Op{Op: c.Op, Args: args, Loop: loop, Multiple: c.Multiple})
	}
	for i, a := range r.Actions {
		args, loop, err := plain(a.Args, a.Loop)
		if err != nil {
			return rule, fmt.Errorf("action %d: %w", i+1, err)
		}
		rule.Actions = append(rule.Actions, Op{Op: a.Op, Args: args, Loop: loop})
	}
	return rule, nil
}

func plain(args, loop any) (any, any, error) {
	a, err := reYAML(args)
	if err != nil {
		return nil, nil, err
	}
	l, err := reYAML(loop)
	if err != nil {
		return nil, nil, err
	}
	if list, ok := l.([]any); ok && len(list) == 0 {
		l = nil
	}
	return a, l, nil
}

// reYAML re-decodes a JSON value as the YAML decoder would have made it.
func reYAML(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := yaml.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}
