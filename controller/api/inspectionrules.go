package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// maxInspectionRules bounds the stored rules: every inspection reads and
// runs them all. Ironic has no limit; Kiln keeps every input bounded.
const maxInspectionRules = 1000

const inspectionRulesTooOld = "The API version does not allow inspection rules"

// inspectionRulesAPI is /v1/inspection_rules (1.96): rules that every
// inspection runs, in-band and discovery alike, together with the
// controller's --inspection-rules file (Ironic's built-in rules). The rules
// are checked by controller/inspectrules, which runs them.
var inspectionRulesAPI = resource[proto.InspectionRule]{
	kind:         "Inspection rule",
	name:         "inspection_rules",
	sinceVersion: 96,
	tooOld:       inspectionRulesTooOld,
	noDetailPath: true,
	listFields:   []string{"uuid", "description", "phase", "priority", "sensitive", "links"},
	createFields: []string{"uuid", "description", "conditions", "actions", "phase", "priority", "sensitive"},
	required:     []string{"actions"},
	patchable:    []string{"description", "conditions", "actions", "phase", "priority", "sensitive"},
	mandatory:    []string{"actions"},
	// Sensitive rules hide both, other rules their secrets (maskRule);
	// listing them as secrets makes every plan that shows them call mask.
	secret:  []string{"conditions", "actions"},
	filters: map[string]filter{"phase": {store: "phase"}},
	fresh: func() proto.InspectionRule {
		return proto.InspectionRule{Phase: "main", Conditions: []proto.InspectionRuleCondition{}}
	},
	validate: func(_ context.Context, r *proto.InspectionRule) error { return checkInspectionRule(r) },
	mask:     maskRule,
	keep:     keepMaskedRule,
	links: func(c echo.Context, r *proto.InspectionRule, _ map[string]bool) {
		r.Links = links(c, "inspection_rules/"+r.UUID)
	},
}

// checkInspectionRule applies Ironic's schema (the shape, priority 0–9999,
// description up to 255 characters, phase "main") and then the operators'
// own checks, normalizing what Ironic shows: an empty loop is none, a
// looped condition's multiple "any".
func checkInspectionRule(r *proto.InspectionRule) error {
	if err := checkLen("inspection_rule", "description", r.Description, 255); err != nil {
		return err
	}
	if len(r.Phase) > 16 {
		return badRequest("Schema error for inspection_rule: '%s' is too long", r.Phase)
	}
	if r.Priority < 0 || r.Priority > inspectrules.MaxPriority {
		return badRequest("Validation failed for inspection rule: Priority must be between 0 and %d for user-defined rules.", inspectrules.MaxPriority)
	}
	if r.Conditions == nil {
		r.Conditions = []proto.InspectionRuleCondition{}
	}
	if len(r.Actions) == 0 {
		return badRequest("Schema error for inspection_rule: actions: [] is too short")
	}
	for i, c := range r.Conditions {
		if err := requireOpArgs("condition", i, c.Op, c.Args); err != nil {
			return err
		}
		r.Conditions[i].Loop = noEmptyLoop(c.Loop)
		if r.Conditions[i].Loop != nil && c.Multiple == "" {
			r.Conditions[i].Multiple = "any"
		}
	}
	for i, a := range r.Actions {
		if err := requireOpArgs("action", i, a.Op, a.Args); err != nil {
			return err
		}
		r.Actions[i].Loop = noEmptyLoop(a.Loop)
	}
	if err := inspectrules.Check(*r); err != nil {
		return badRequest("Validation failed for %v", err)
	}
	return nil
}

// noEmptyLoop is loop, nil when it is an empty list (no loop, in Ironic).
func noEmptyLoop(loop any) any {
	if l, ok := loop.([]any); ok && len(l) == 0 {
		return nil
	}
	return loop
}

func requireOpArgs(kind string, i int, op string, args any) error {
	switch {
	case op == "":
		return badRequest("Schema error for inspection_rule: %s %d: 'op' is a required property", kind, i+1)
	case args == nil:
		return badRequest("Schema error for inspection_rule: %s %d: 'args' is a required property", kind, i+1)
	}
	return nil
}

// mountInspectionRules routes /v1/inspection_rules, with DELETE of the
// whole collection (every stored rule; the file's rules stay, as Ironic's
// built-in rules do).
func (s *Server) mountInspectionRules(e *echo.Echo) {
	ir := inspectionRulesAPI
	st, err := store.NewResources(s.store, store.InspectionRuleResource)
	// Creating a rule past the limit is refused; unsetting sensitive too.
	ir.check = func(ctx context.Context, old, updated *proto.InspectionRule) error {
		switch {
		case old == nil && updated != nil:
			items, err := st.List(ctx, store.Query{Limit: maxInspectionRules})
			if err != nil {
				return err
			}
			if len(items) >= maxInspectionRules {
				return badRequest("There are %d inspection rules already, the most Kiln keeps; delete some first.", maxInspectionRules)
			}
		case old != nil && updated != nil && old.Sensitive && !updated.Sensitive:
			return badRequest("Inspection rules cannot have the sensitive flag unset.")
		}
		return nil
	}
	ir.mount(e, st, err)
	s.inspectionRules, s.inspectionRulesErr = &ir, err
	e.DELETE("/v1/inspection_rules", s.deleteInspectionRules)
	e.DELETE("/v1/inspection_rules/", s.deleteInspectionRules)
}

func (s *Server) deleteInspectionRules(c echo.Context) error {
	if minor(c) < inspectionRulesAPI.sinceVersion {
		return errorf(http.StatusMethodNotAllowed, "%s", inspectionRulesTooOld)
	}
	if s.inspectionRulesErr != nil {
		return errorf(http.StatusServiceUnavailable, "inspection_rules are not available: %v", s.inspectionRulesErr)
	}
	n, err := s.inspectionRules.store.DeleteAll(c.Request().Context())
	if err != nil {
		return err
	}
	s.log.Info("inspection rules deleted", "rules", n)
	return c.NoContent(http.StatusNoContent)
}

// rulesWith is the file's rules (nil: none) merged with the stored ones,
// as an inspection runs them.
func (s *Server) rulesWith(ctx context.Context, file *inspectrules.Set) (*inspectrules.Set, error) {
	if s.inspectionRules == nil || s.inspectionRulesErr != nil {
		return file, nil
	}
	stored, err := store.InspectionRules(ctx, s.inspectionRules.store, "main")
	if err != nil {
		return nil, fmt.Errorf("read the stored inspection rules: %w", err)
	}
	set, err := inspectrules.FromStored(stored)
	if err != nil {
		return nil, err
	}
	return inspectrules.Merge(set, file), nil
}
