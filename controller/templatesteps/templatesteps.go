// Package templatesteps decides which deploy steps a node's deploy
// templates add to its deploy, as Ironic does: the templates named by the
// node's instance_info.traits (each of which must also be a node trait)
// contribute their steps; a deploy step the user gave for the same
// interface and step wins; two templates may not both name one step. It is
// pure: the caller reads the templates.
package templatesteps

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// InstanceTraits reads instance_info.traits: nil when absent or empty, an
// error when it is not a list of strings.
func InstanceTraits(n *proto.Node) ([]string, error) {
	raw, ok := n.InstanceInfo["traits"]
	if !ok || raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		if s, ok := raw.([]string); ok {
			return s, nil
		}
		return nil, fmt.Errorf("Error parsing traits from Node %s instance_info field. A list of strings is expected.", n.UUID)
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("Error parsing traits from Node %s instance_info field. A list of strings is expected.", n.UUID)
		}
		out = append(out, s)
	}
	return out, nil
}

// Selected returns the instance traits that name templates, after checking
// that each is also a trait of the node.
func Selected(n *proto.Node) ([]string, error) {
	want, err := InstanceTraits(n)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, t := range want {
		if !slices.Contains(n.Traits, t) && !slices.Contains(missing, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("Cannot specify instance traits that are not also set on the node. Node %s is missing traits %s",
			n.UUID, strings.Join(missing, ", "))
	}
	return want, nil
}

// Steps returns user, the deploy steps of the request, followed by the
// steps of those templates that the node selects (Selected); templates not
// selected are ignored, so callers may pass a superset. Template steps are
// added in template name order; a step the user also gave is left out.
func Steps(n *proto.Node, user []proto.StepCall, templates []proto.DeployTemplate) ([]proto.StepCall, error) {
	names, err := Selected(n)
	if err != nil || len(names) == 0 {
		return user, err
	}
	var chosen []proto.DeployTemplate
	for _, t := range templates {
		if slices.Contains(names, t.Name) && !slices.ContainsFunc(chosen, func(c proto.DeployTemplate) bool { return c.UUID == t.UUID }) {
			chosen = append(chosen, t)
		}
	}
	slices.SortFunc(chosen, func(a, b proto.DeployTemplate) int { return strings.Compare(a.Name, b.Name) })
	var fromTemplates []proto.StepCall
	count := map[string]int{}
	for _, t := range chosen {
		for _, s := range t.Steps {
			fromTemplates = append(fromTemplates, proto.StepCall{
				Step: proto.Step{Interface: s.Interface, Step: s.Step, Priority: s.Priority},
				Args: s.Args,
			})
			count[s.Interface+"."+s.Step]++
		}
	}
	var dups []string
	for id, c := range count {
		if c > 1 {
			dups = append(dups, id)
		}
	}
	if len(dups) > 0 {
		slices.Sort(dups)
		var tn []string
		for _, t := range chosen {
			tn = append(tn, t.Name)
		}
		return nil, fmt.Errorf("Validation of deploy steps from deploy templates matching this node's instance traits failed. "+
			"Matching deploy templates: %s. Errors: deploy steps from all deploy templates matching this node's instance traits "+
			"cannot have the same interface and step. Duplicate deploy steps for %s", strings.Join(tn, ","), strings.Join(dups, ", "))
	}
	out := slices.Clone(user)
	for _, s := range fromTemplates {
		if !slices.ContainsFunc(user, func(u proto.StepCall) bool { return u.Interface == s.Interface && u.Step.Step == s.Step.Step }) {
			out = append(out, s)
		}
	}
	return out, nil
}
