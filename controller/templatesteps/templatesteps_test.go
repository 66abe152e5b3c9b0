package templatesteps

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func call(iface, step string, prio int, args proto.Dict) proto.StepCall {
	return proto.StepCall{Step: proto.Step{Interface: iface, Step: step, Priority: prio}, Args: args}
}

func tmpl(uuid, name string, steps ...proto.DeployTemplateStep) proto.DeployTemplate {
	return proto.DeployTemplate{UUID: uuid, Name: name, Steps: steps}
}

func tstep(iface, step string, prio int) proto.DeployTemplateStep {
	return proto.DeployTemplateStep{Interface: iface, Step: step, Priority: prio, Args: proto.Dict{"from": step}}
}

// show renders steps as iface.step/priority/args-from for comparison.
func show(steps []proto.StepCall) string {
	var out []string
	for _, s := range steps {
		out = append(out, fmt.Sprintf("%s.%s/%d/%v", s.Interface, s.Step.Step, s.Priority, s.Args["from"]))
	}
	return strings.Join(out, " ")
}

func TestSteps(t *testing.T) {
	ht := tmpl("u1", "CUSTOM_HT", tstep("bios", "apply_configuration", 150))
	raid := tmpl("u2", "CUSTOM_RAID", tstep("raid", "create_configuration", 70), tstep("raid", "delete_configuration", 0))
	clash := tmpl("u3", "CUSTOM_CLASH", tstep("bios", "apply_configuration", 10))
	for _, tc := range []struct {
		name      string
		instance  any // instance_info.traits
		node      []string
		user      []proto.StepCall
		templates []proto.DeployTemplate
		want      string
		err       string
	}{
		{name: "no instance traits", node: []string{"CUSTOM_HT"}, templates: []proto.DeployTemplate{ht}, want: ""},
		{name: "empty instance traits", instance: []any{}, node: []string{"CUSTOM_HT"}, templates: []proto.DeployTemplate{ht}, want: ""},
		{name: "one template", instance: []any{"CUSTOM_HT"}, node: []string{"CUSTOM_HT"}, templates: []proto.DeployTemplate{ht},
			want: "bios.apply_configuration/150/apply_configuration"},
		{name: "template not named", instance: []any{"CUSTOM_HT"}, node: []string{"CUSTOM_HT", "CUSTOM_RAID"},
			templates: []proto.DeployTemplate{ht, raid}, want: "bios.apply_configuration/150/apply_configuration"},
		{name: "two templates in name order, priority 0 kept (it disables a driver step)", instance: []any{"CUSTOM_RAID", "CUSTOM_HT"},
			node: []string{"CUSTOM_HT", "CUSTOM_RAID"}, templates: []proto.DeployTemplate{raid, ht},
			want: "bios.apply_configuration/150/apply_configuration raid.create_configuration/70/create_configuration raid.delete_configuration/0/delete_configuration"},
		{name: "a trait with no template", instance: []any{"CUSTOM_NONE"}, node: []string{"CUSTOM_NONE"}, templates: []proto.DeployTemplate{ht}, want: ""},
		{name: "user step wins", instance: []any{"CUSTOM_HT"}, node: []string{"CUSTOM_HT"}, templates: []proto.DeployTemplate{ht},
			user: []proto.StepCall{call("bios", "apply_configuration", 5, proto.Dict{"from": "user"}), call("deploy", "x", 1, nil)},
			want: "bios.apply_configuration/5/user deploy.x/1/<nil>"},
		{name: "user steps without templates", user: []proto.StepCall{call("deploy", "x", 1, nil)}, want: "deploy.x/1/<nil>"},
		{name: "template listed twice counts once", instance: []any{"CUSTOM_HT"}, node: []string{"CUSTOM_HT"},
			templates: []proto.DeployTemplate{ht, ht}, want: "bios.apply_configuration/150/apply_configuration"},
		{name: "instance trait not on the node", instance: []any{"CUSTOM_HT", "CUSTOM_RAID"}, node: []string{"CUSTOM_HT"},
			templates: []proto.DeployTemplate{ht, raid}, err: "Cannot specify instance traits that are not also set on the node. Node n1 is missing traits CUSTOM_RAID"},
		{name: "node without traits", instance: []any{"CUSTOM_HT"}, templates: []proto.DeployTemplate{ht}, err: "missing traits CUSTOM_HT"},
		{name: "traits not a list", instance: "CUSTOM_HT", node: []string{"CUSTOM_HT"}, err: "A list of strings is expected."},
		{name: "traits not strings", instance: []any{1.0}, node: []string{"CUSTOM_HT"}, err: "A list of strings is expected."},
		{name: "two templates with the same step", instance: []any{"CUSTOM_HT", "CUSTOM_CLASH"}, node: []string{"CUSTOM_HT", "CUSTOM_CLASH"},
			templates: []proto.DeployTemplate{ht, clash},
			err:       "Matching deploy templates: CUSTOM_CLASH,CUSTOM_HT. Errors: deploy steps from all deploy templates matching this node's instance traits cannot have the same interface and step. Duplicate deploy steps for bios.apply_configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &proto.Node{UUID: "n1", Traits: tc.node, InstanceInfo: proto.Dict{}}
			if tc.instance != nil {
				n.InstanceInfo["traits"] = tc.instance
			}
			got, err := Steps(n, tc.user, tc.templates)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if show(got) != tc.want {
				t.Errorf("steps\n got %s\nwant %s", show(got), tc.want)
			}
		})
	}
}

// TestStepsLeavesUserAlone: the user's slice is not modified.
func TestStepsLeavesUserAlone(t *testing.T) {
	user := make([]proto.StepCall, 1, 4)
	user[0] = call("deploy", "x", 1, nil)
	n := &proto.Node{UUID: "n1", Traits: []string{"CUSTOM_HT"}, InstanceInfo: proto.Dict{"traits": []any{"CUSTOM_HT"}}}
	got, err := Steps(n, user, []proto.DeployTemplate{tmpl("u", "CUSTOM_HT", tstep("bios", "b", 1))})
	if err != nil || len(got) != 2 {
		t.Fatal(got, err)
	}
	if user[:2][1].Step.Step != "" {
		t.Errorf("the user's backing array was written: %v", user[:2])
	}
}
