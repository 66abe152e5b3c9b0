package proto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// DeployTemplate is a named list of deploy steps (Ironic's
// /v1/deploy_templates, 1.55): a deploy whose instance_info.traits name it
// runs its steps.
type DeployTemplate struct {
	UUID      string               `json:"uuid"`
	Name      string               `json:"name"`
	Steps     []DeployTemplateStep `json:"steps"`
	Extra     Dict                 `json:"extra"`
	CreatedAt *Time                `json:"created_at"`
	UpdatedAt *Time                `json:"updated_at"`
	Links     []Link               `json:"links,omitempty"`
}

// DeployTemplateStep is one step of a deploy template. Priority 0 disables
// a step the driver would otherwise run.
type DeployTemplateStep struct {
	Interface string `json:"interface"`
	Step      string `json:"step"`
	Args      Dict   `json:"args"`
	Priority  int    `json:"priority"`
}

// UnmarshalJSON checks the step as Ironic's schema does: exactly these
// keys, all required, the priority a non-negative integer (or a string of
// digits).
func (s *DeployTemplateStep) UnmarshalJSON(b []byte) error {
	u, err := decodeUserStep(b, "priority", true)
	if err != nil {
		return err
	}
	*s = DeployTemplateStep{Interface: u.iface, Step: u.step, Args: u.args, Priority: u.n}
	return nil
}

// RunbookStep is one step of a runbook, run in the order of Order.
type RunbookStep struct {
	Interface string `json:"interface"`
	Step      string `json:"step"`
	Args      Dict   `json:"args"`
	Order     int    `json:"order"`
}

// UnmarshalJSON checks the step as Ironic's schema does: interface, step
// and order required, args optional (an empty object when absent).
func (s *RunbookStep) UnmarshalJSON(b []byte) error {
	u, err := decodeUserStep(b, "order", false)
	if err != nil {
		return err
	}
	*s = RunbookStep{Interface: u.iface, Step: u.step, Args: u.args, Order: u.n}
	return nil
}

type userStep struct {
	iface, step string
	args        Dict
	n           int
}

// decodeUserStep reads a step object whose keys are interface, step, args
// and numKey, with jsonschema's wording in its errors.
func decodeUserStep(b []byte, numKey string, argsRequired bool) (userStep, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return userStep{}, fmt.Errorf("%s is not of type 'object'", strings.TrimSpace(string(b)))
	}
	allowed := []string{"interface", "step", "args", numKey}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range raw {
			if !yield(k) {
				return
			}
		}
	}) {
		if !slices.Contains(allowed, k) {
			return userStep{}, fmt.Errorf("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	required := []string{"interface", "step", numKey}
	if argsRequired {
		required = []string{"interface", "step", "args", numKey}
	}
	for _, k := range required {
		if _, ok := raw[k]; !ok {
			return userStep{}, fmt.Errorf("'%s' is a required property", k)
		}
	}
	var u userStep
	if err := json.Unmarshal(raw["interface"], &u.iface); err != nil {
		return u, fmt.Errorf("%s is not of type 'string'", raw["interface"])
	}
	if err := json.Unmarshal(raw["step"], &u.step); err != nil {
		return u, fmt.Errorf("%s is not of type 'string'", raw["step"])
	}
	if u.step == "" {
		return u, fmt.Errorf("'' is too short")
	}
	if a, ok := raw["args"]; ok {
		d := json.NewDecoder(bytes.NewReader(a))
		d.UseNumber()
		if err := d.Decode(&u.args); err != nil || u.args == nil {
			return u, fmt.Errorf("%s is not of type 'object'", a)
		}
	} else {
		u.args = Dict{}
	}
	n, err := stepNumber(raw[numKey])
	if err != nil {
		return u, fmt.Errorf("%s: %w", numKey, err)
	}
	u.n = n
	return u, nil
}

// stepNumber reads a priority or order: a non-negative integer, or a
// string of digits (Ironic's schema allows both), at most 2^31-1 (its
// column's range).
func stepNumber(raw json.RawMessage) (int, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
		if s == "" || strings.Trim(s, "0123456789") != "" {
			return 0, fmt.Errorf("%q does not match '^[0-9]+$'", s)
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%s is not a non-negative integer of at most %d", raw, math.MaxInt32)
	}
	return int(n), nil
}

// Runbook is a named list of steps for manual cleaning or servicing
// (Ironic's /v1/runbooks, 1.92): PUT …/states/provision with target clean
// or service and "runbook" runs them on a node that has the runbook's name
// among its traits (below 1.112) or one of the runbook's traits (from it).
type Runbook struct {
	UUID           string        `json:"uuid"`
	Name           string        `json:"name"`
	Steps          []RunbookStep `json:"steps"`
	DisableRamdisk bool          `json:"disable_ramdisk"`
	Extra          Dict          `json:"extra"`
	Public         bool          `json:"public"`
	Owner          *string       `json:"owner"`
	// Description (1.112) is free text; Traits (1.112) are the node
	// traits that approve the runbook for a node, set through
	// /v1/runbooks/{id}/traits only.
	Description *string  `json:"description"`
	Traits      []string `json:"traits"`
	CreatedAt   *Time    `json:"created_at"`
	UpdatedAt   *Time    `json:"updated_at"`
	Links       []Link   `json:"links,omitempty"`
}

// RunbookFieldMinVersion gives the microversion of the runbook fields
// newer than runbooks (1.92).
var RunbookFieldMinVersion = map[string]int{"description": 112, "traits": 112}
