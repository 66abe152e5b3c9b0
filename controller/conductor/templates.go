package conductor

import (
	"context"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/controller/templatesteps"
	"github.com/kilnhq/kiln/proto"
)

// deploySteps are the operator's deploy steps merged with those of the
// deploy templates the node's instance traits select (templatesteps.Steps):
// nil when no template is selected, so the plan uses the operator's alone.
// Only a node that is deploying reads them.
func (f *flow) deploySteps(ctx context.Context, user []proto.StepCall) ([]proto.StepCall, error) {
	if s := f.n.ProvisionState; s != proto.StateDeploying && s != proto.StateDeployWait {
		return nil, nil
	}
	names, err := templatesteps.Selected(f.n)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	rs, err := store.NewResources(f.c.st, store.DeployTemplateResource)
	if err != nil {
		return nil, err
	}
	var templates []proto.DeployTemplate
	for _, name := range names {
		found, err := rs.List(ctx, store.Query{Filters: map[string]string{"name": name}, Limit: 1})
		if err != nil {
			return nil, err
		}
		for _, t := range found {
			templates = append(templates, *t)
		}
	}
	steps, err := templatesteps.Steps(f.n, user, templates)
	if steps == nil && err == nil {
		steps = []proto.StepCall{}
	}
	return steps, err
}
