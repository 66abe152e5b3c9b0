package decide

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Plan is the step list of a flow once the agent's steps are known.
func Plan(in Input, kind proto.StepKind, agent []proto.Step) ([]proto.StepCall, error) {
	s := in.State
	agent = withoutForeignRAID(in.Node, agent)
	if len(in.DriverSteps) > 0 {
		agent = append(slices.Clone(agent), in.DriverSteps...)
	}
	switch kind {
	case proto.StepService:
		return buildCleanSteps(agent, s.ServiceSteps, true)
	case proto.StepClean:
		return buildCleanSteps(agent, s.ManualCleanSteps, isManualClean(in.Node))
	}
	if in.TemplateErr != nil {
		return nil, in.TemplateErr
	}
	user := s.UserDeploySteps
	if in.DeploySteps != nil {
		user = in.DeploySteps
	}
	return buildDeploySteps(in.Deploy.WritesImage, agent, user), nil
}

// interfaceRank breaks priority ties the way Ironic does.
var interfaceRank = map[string]int{"vendor": 7, "power": 6, "management": 5, "firmware": 4, "deploy": 3, "bios": 2, "raid": 1}

// sortSteps orders steps by priority, highest first, ties by interface.
func sortSteps(steps []proto.StepCall) {
	sort.SliceStable(steps, func(i, j int) bool {
		if steps[i].Priority != steps[j].Priority {
			return steps[i].Priority > steps[j].Priority
		}
		return interfaceRank[steps[i].Interface] > interfaceRank[steps[j].Interface]
	})
}

// conductorSteps are deploy steps the conductor runs itself (out of band).
var conductorSteps = map[string]bool{
	"prepare_instance_boot": true, "tear_down_agent": true, "switch_to_tenant_network": true, "boot_instance": true,
}

func isConductorStep(s proto.StepCall) bool {
	return s.Interface == "deploy" && conductorSteps[s.Step.Step]
}

// isDriverStep: s is one of the node's out-of-band interfaces' steps.
func isDriverStep(in Input, s proto.StepCall) bool {
	return slices.ContainsFunc(in.DriverSteps, func(d proto.Step) bool { return d.Interface == s.Interface && d.Step == s.Step.Step })
}

// agentSteps flattens get_X_steps's answer, best manager first per step name
// (the agent already deduplicated; keep the first occurrence).
func agentSteps(res proto.StepsResult) []proto.Step {
	managers := make([]string, 0, len(res.Steps))
	for m := range res.Steps {
		managers = append(managers, m)
	}
	sort.Strings(managers)
	seen := map[string]bool{}
	var out []proto.Step
	for _, m := range managers {
		for _, s := range res.Steps[m] {
			key := s.Interface + "." + s.Step
			if !seen[key] {
				seen[key] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// buildDeploySteps is the deploy plan once the agent has listed its steps:
// the deploy interface's own steps, the agent's steps with a priority, and the
// user's deploy_steps (which override the priority of a step of the same name).
func buildDeploySteps(writesImage bool, agent []proto.Step, user []proto.StepCall) []proto.StepCall {
	byName := map[string]proto.StepCall{}
	add := func(s proto.StepCall) { byName[s.Interface+"."+s.Step.Step] = s }
	if writesImage {
		// Its arguments are the flow state's ImageArgs, added when it is sent.
		add(proto.StepCall{Step: proto.Step{Step: "write_image", Interface: "deploy", Priority: 80}})
	}
	add(proto.StepCall{Step: proto.Step{Step: "prepare_instance_boot", Interface: "deploy", Priority: 60}})
	add(proto.StepCall{Step: proto.Step{Step: "tear_down_agent", Interface: "deploy", Priority: 40}})
	add(proto.StepCall{Step: proto.Step{Step: "switch_to_tenant_network", Interface: "deploy", Priority: 30}})
	add(proto.StepCall{Step: proto.Step{Step: "boot_instance", Interface: "deploy", Priority: 20}})
	for _, s := range agent {
		if s.Priority > 0 {
			if _, taken := byName[s.Interface+"."+s.Step]; !taken {
				add(proto.StepCall{Step: s})
			}
		}
	}
	for _, u := range user {
		key := u.Interface + "." + u.Step.Step
		if cur, ok := byName[key]; ok {
			cur.Priority = u.Priority
			if u.Args != nil {
				cur.Args = u.Args
			}
			u = cur
		} else {
			for _, s := range agent {
				if s.Interface == u.Interface && s.Step == u.Step.Step {
					u.RebootRequested, u.Abortable = s.RebootRequested, s.Abortable
				}
			}
		}
		add(u)
	}
	var steps []proto.StepCall
	for _, s := range byName {
		if s.Priority > 0 {
			steps = append(steps, s)
		}
	}
	sortSteps(steps)
	return steps
}

// buildCleanSteps is the clean plan: for automated cleaning the agent's steps
// with a priority, highest first; for manual cleaning the user's steps in the
// order given, completed with what the agent knows about each.
func buildCleanSteps(agent []proto.Step, manual []proto.StepCall, isManual bool) ([]proto.StepCall, error) {
	if !isManual {
		var steps []proto.StepCall
		for _, s := range agent {
			if s.Priority > 0 {
				steps = append(steps, proto.StepCall{Step: s})
			}
		}
		sortSteps(steps)
		return steps, nil
	}
	steps := slices.Clone(manual)
	for i, u := range steps {
		found := false
		for _, s := range agent {
			if s.Interface == u.Interface && s.Step == u.Step.Step {
				steps[i].RebootRequested, steps[i].Abortable, found = s.RebootRequested, s.Abortable, true
			}
		}
		if !found {
			return nil, fmt.Errorf("the requested clean step %s.%s is not offered by the agent (it offers %s)", u.Interface, u.Step.Step, stepNames(agent))
		}
	}
	return steps, nil
}

func stepNames(steps []proto.Step) string {
	var names []string
	for _, s := range steps {
		names = append(names, s.Interface+"."+s.Step)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// withImageArgs gives write_image its arguments from the flow state, unless
// the operator's deploy_steps gave it some.
func withImageArgs(s proto.StepCall, fs flowstate.State) proto.StepCall {
	if s.Interface == "deploy" && s.Step.Step == "write_image" && s.Args == nil && fs.ImageArgs != nil {
		s.Image = fs.ImageArgs
	}
	return s
}

func stepLabel(s proto.StepCall) string { return s.Interface + "." + s.Step.Step }

// stepDict is a step as the node's clean_step/deploy_step shows it, the
// config drive masked.
func stepDict(s proto.StepCall) proto.Dict {
	args := proto.Dict{}
	for k, v := range s.Args {
		if k == "configdrive" {
			v = "******"
		}
		args[k] = v
	}
	if s.Image != nil {
		args["image_info"] = s.Image.ImageInfo
		if len(s.Image.Configdrive) > 0 {
			args["configdrive"] = "******"
		}
	}
	return proto.Dict{"interface": s.Interface, "step": s.Step.Step, "priority": s.Priority, "args": args}
}
