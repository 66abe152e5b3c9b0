package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/controller/traitname"
	"github.com/kilnhq/kiln/proto"
)

// maxTemplateSteps bounds a deploy template's or a runbook's steps; Ironic
// has no limit, Kiln keeps every input bounded.
const maxTemplateSteps = 100

// deployStepInterfaces are the interfaces a user deploy step may name
// (Ironic's DEPLOYING_INTERFACE_PRIORITY).
var deployStepInterfaces = []string{"bios", "deploy", "firmware", "management", "power", "raid", "vendor"}

// deployTemplatesAPI is /v1/deploy_templates (1.55): named deploy steps
// that a deploy runs when its instance_info.traits name the template.
var deployTemplatesAPI = resource[proto.DeployTemplate]{
	kind:         "Deploy template",
	name:         "deploy_templates",
	sinceVersion: 55,
	tooOld:       "The API version does not allow deploy templates",
	byName:       "name",
	listFields:   []string{"uuid", "name", "links"},
	createFields: []string{"name", "steps", "extra", "uuid"},
	required:     []string{"name", "steps"},
	patchable:    []string{"name", "steps", "extra"},
	mandatory:    []string{"name", "steps"},
	secret:       []string{"steps"},
	fresh:        func() proto.DeployTemplate { return proto.DeployTemplate{Extra: proto.Dict{}} },
	validate: func(_ context.Context, d *proto.DeployTemplate) error {
		if d.Extra == nil {
			d.Extra = proto.Dict{}
		}
		if err := checkTraitName("deploy template", d.Name); err != nil {
			return err
		}
		return checkDeploySteps(d.Steps)
	},
	mask: func(d *proto.DeployTemplate) proto.DeployTemplate {
		m := *d
		m.Steps = slices.Clone(d.Steps)
		for i := range m.Steps {
			m.Steps[i].Args = secrets.MaskDict(m.Steps[i].Args)
		}
		return m
	},
	links: func(c echo.Context, d *proto.DeployTemplate, _ map[string]bool) {
		d.Links = links(c, "deploy_templates/"+d.UUID)
	},
	taken: func(err error, d *proto.DeployTemplate) *Error {
		if errors.Is(err, store.ErrTemplateNameTaken) {
			return conflict("A deploy template with name %s already exists.", d.Name)
		}
		return nil
	},
}

// checkTraitName refuses a name that is not a valid trait, as Ironic's
// schema does for deploy templates and runbooks.
func checkTraitName(what, name string) error {
	if !traitname.Valid(name) {
		return badRequest("Invalid %s name %q: a name must be a standard trait or match ^CUSTOM_[A-Z0-9_]+$, at most %d characters.",
			what, name, traitname.MaxLen)
	}
	return nil
}

// checkDeploySteps applies Ironic's rules to a template's steps: at least
// one, known interfaces, each interface.step at most once.
func checkDeploySteps(steps []proto.DeployTemplateStep) error {
	ids := make([][2]string, len(steps))
	for i, s := range steps {
		ids[i] = [2]string{s.Interface, s.Step}
	}
	return checkUserSteps("deploy template", ids)
}

// checkUserSteps checks the interface and step of each of a template's or
// runbook's steps (the rest the step's decoding checked).
func checkUserSteps(what string, steps [][2]string) error {
	if len(steps) == 0 {
		return badRequest("Invalid %s: steps: [] is too short", what)
	}
	if len(steps) > maxTemplateSteps {
		return badRequest("Invalid %s: more than %d steps", what, maxTemplateSteps)
	}
	var dups []string
	seen := map[string]bool{}
	for _, s := range steps {
		if !slices.Contains(deployStepInterfaces, s[0]) {
			return badRequest("Invalid %s: interface: '%s' is not one of %s", what, s[0], quoteList(deployStepInterfaces))
		}
		if err := checkStepName(s[1]); err != nil {
			return err
		}
		key := s[0] + "." + s[1]
		if seen[key] && !slices.Contains(dups, key) {
			dups = append(dups, key)
		}
		seen[key] = true
	}
	if len(dups) > 0 {
		var parts []string
		for _, d := range dups {
			iface, step, _ := strings.Cut(d, ".")
			parts = append(parts, fmt.Sprintf("interface: %s, step: %s", iface, step))
		}
		// Ironic words it so for runbooks too.
		return badRequest("Deploy template invalid: Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: %s.",
			strings.Join(parts, "; "))
	}
	return nil
}

// checkStepName bounds a step's name (its args are bounded by the body
// limit).
func checkStepName(step string) error {
	if len(step) > 255 {
		return badRequest("Invalid step name: longer than 255 characters")
	}
	return nil
}

func quoteList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = "'" + s + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}
