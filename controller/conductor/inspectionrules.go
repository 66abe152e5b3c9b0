package conductor

import (
	"context"

	"github.com/kilnhq/kiln/controller/inspectrules"
	"github.com/kilnhq/kiln/controller/store"
)

// storedRules reads the inspection rules stored through the API, which an
// inspection runs with the --inspection-rules file's. They are read at
// each inspection, so a rule another controller stored applies at once. A
// Store that is not SQL (a test's) stores none.
func (c *Conductor) storedRules(ctx context.Context) (*inspectrules.Set, error) {
	rs, err := store.NewResources(c.st, store.InspectionRuleResource)
	if err != nil {
		return nil, nil
	}
	rules, err := store.InspectionRules(ctx, rs, "main")
	if err != nil {
		return nil, err
	}
	return inspectrules.FromStored(rules)
}
