package proto

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// InspectionRule is one of Ironic's inspection rules (/v1/inspection_rules,
// 1.96): conditions over a node and its inspection data, and the actions
// that change the node when they all hold. Inspections run the stored rules
// together with the controller's rules file, higher priority first.
type InspectionRule struct {
	UUID        string  `json:"uuid"`
	Description *string `json:"description"`
	// Priority orders the rules, higher first: 0–9999 for stored rules.
	Priority int `json:"priority"`
	// Phase is "main", the only phase Ironic has.
	Phase string `json:"phase"`
	// Sensitive rules show null conditions and actions in API answers;
	// once set it cannot be unset.
	Sensitive  bool                      `json:"sensitive"`
	Conditions []InspectionRuleCondition `json:"conditions"`
	Actions    []InspectionRuleAction    `json:"actions"`
	CreatedAt  *Time                     `json:"created_at"`
	UpdatedAt  *Time                     `json:"updated_at"`
	Links      []Link                    `json:"links,omitempty"`
}

// InspectionRuleCondition is one condition: an operator ("!" negates it),
// its arguments (a mapping, or a list in the operator's order), and an
// optional loop whose results multiple combines. Ironic shows loop and
// multiple only on looped conditions.
type InspectionRuleCondition struct {
	Op       string `json:"op"`
	Args     any    `json:"args"`
	Loop     any    `json:"loop,omitempty"`
	Multiple string `json:"multiple,omitempty"`
}

// InspectionRuleAction is one action: an operator, its arguments and an
// optional loop (shown only when there is one, as Ironic does).
type InspectionRuleAction struct {
	Op   string `json:"op"`
	Args any    `json:"args"`
	Loop any    `json:"loop,omitempty"`
}

// UnmarshalJSON refuses keys Ironic's operators do not take, so that a
// misspelt "mutliple" is an error rather than silently ignored.
func (c *InspectionRuleCondition) UnmarshalJSON(b []byte) error {
	type plain InspectionRuleCondition
	var p plain
	if err := strictJSON(b, &p); err != nil {
		return fmt.Errorf("inspection rule condition: %w", err)
	}
	*c = InspectionRuleCondition(p)
	return nil
}

// UnmarshalJSON refuses unknown keys, as for conditions.
func (a *InspectionRuleAction) UnmarshalJSON(b []byte) error {
	type plain InspectionRuleAction
	var p plain
	if err := strictJSON(b, &p); err != nil {
		return fmt.Errorf("inspection rule action: %w", err)
	}
	*a = InspectionRuleAction(p)
	return nil
}

// strictJSON decodes b into v refusing unknown fields, numbers kept as
// written.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	d.UseNumber()
	return d.Decode(v)
}
