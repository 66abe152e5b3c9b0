package conductor

import (
	"context"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/controller/templatesteps"
	"github.com/kilnhq/kiln/proto"
)

// deployPlan is the deploy's step list: the user's deploy steps, those of
// the deploy templates the node's instance traits select, and the agent's
// and the deploy interface's own.
func (f *flow) deployPlan(ctx context.Context, agent []proto.Step, user []proto.StepCall, args *proto.PrepareImageParams) ([]proto.StepCall, *proto.PrepareImageParams, error) {
	steps, err := f.withTemplateSteps(ctx, user)
	if err != nil {
		return nil, nil, err
	}
	return buildDeploySteps(f.ifs.Deploy, agent, steps), args, nil
}

// withTemplateSteps reads the templates named by the node's instance
// traits and adds their steps to user (templatesteps.Steps).
func (f *flow) withTemplateSteps(ctx context.Context, user []proto.StepCall) ([]proto.StepCall, error) {
	names, err := templatesteps.Selected(f.n)
	if err != nil || len(names) == 0 {
		return user, err
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
	return templatesteps.Steps(f.n, user, templates)
}
