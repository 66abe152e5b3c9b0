package store

import (
	"context"

	"github.com/kilnhq/kiln/proto"
)

// InspectionRuleResource is how inspection rules are stored (migration
// 0029). Inspections read them all; the phase, priority, description and
// sensitive columns serve the list's filter and sort keys.
var InspectionRuleResource = Resource[proto.InspectionRule]{
	Kind:  "inspection rule",
	Table: "inspection_rules",
	Meta: func(r *proto.InspectionRule) (*string, **proto.Time, **proto.Time) {
		return &r.UUID, &r.CreatedAt, &r.UpdatedAt
	},
	Columns: []Column[proto.InspectionRule]{
		{Name: "phase", Value: func(r *proto.InspectionRule) any { return r.Phase }},
		{Name: "priority", Value: func(r *proto.InspectionRule) any { return r.Priority }},
		// A rule without a description sorts as an empty one (a NULL
		// marker would not seek).
		{Name: "description", Value: func(r *proto.InspectionRule) any {
			if r.Description == nil {
				return ""
			}
			return *r.Description
		}},
		{Name: "sensitive", Value: func(r *proto.InspectionRule) any {
			if r.Sensitive {
				return 1
			}
			return 0
		}},
	},
	Sort: map[string]string{"phase": "phase", "priority": "priority", "description": "description",
		"sensitive": "sensitive"},
	Filters: map[string]string{"phase": "phase"},
	Bare:    func(r *proto.InspectionRule) { r.Links = nil },
}

// InspectionRules reads every stored rule of the phase in insertion order,
// the order Ironic's database lists them in before sorting by priority.
func InspectionRules(ctx context.Context, rs *Resources[proto.InspectionRule], phase string) ([]proto.InspectionRule, error) {
	items, err := rs.List(ctx, Query{Filters: map[string]string{"phase": phase}})
	if err != nil {
		return nil, err
	}
	out := make([]proto.InspectionRule, len(items))
	for i, r := range items {
		out[i] = *r
	}
	return out, nil
}
