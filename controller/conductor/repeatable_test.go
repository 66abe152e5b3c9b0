package conductor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"testing"

	"github.com/kilnhq/kiln/controller/conductor/decide"
)

// Which actions may run again after a crash. The executor stores the
// changes a pass decided before each action that is not deferrable
// (commit.go), so a crash between an action and its commit redoes the
// action in the next pass. Running an action before the commit of the
// changes that led to it is only right for actions in this table marked
// repeatable: a second run, after a crash, finds the world as the first
// left it and changes nothing more (a setting set again, a target state
// reached again, a read). This is the specification that moving BMC
// calls before their commit (fewer commits per pass) has to follow.
var crashRepeat = []struct {
	action     decide.Action
	repeatable bool
	why        string
}{
	{decide.Update{}, true, "not stored means not done: the next pass decides again from the stored node"},
	{decide.History{}, true, "recorded with the commit; the pass that redoes the change records it again"},
	{decide.Wake{}, true, "in memory only; the periodic scan is the safety net"},
	{decide.BuildImageArgs{}, true, "computes write_image's arguments; nothing outside changes"},
	{decide.AgentCommands{}, true, "reads the agent's command list"},
	{decide.AgentGetSteps{}, true, "reads the agent's steps"},
	{decide.ReadPower{}, true, "reads the BMC"},
	{decide.ReadInventory{}, true, "reads the inventory the agent posted"},
	{decide.Validate{}, true, "checks; changes nothing"},
	{decide.Inspect{}, true, "reads the BMC; the answer is an event"},
	{decide.RefreshHardware{}, true, "re-reads BIOS settings and firmware into their cache"},
	{decide.AgentPartitionUUIDs{}, true, "reads the partitions and records them"},
	{decide.SetBootDevice{}, true, "a setting, set again to the same value"},
	{decide.SetSecureBoot{}, true, "a setting, set again to the same value"},
	{decide.PrepareInstance{}, true, "boots the instance: the same boot settings again"},
	{decide.CleanUpRamdisk{}, true, "removes what PrepareRamdisk set up; removing it again finds nothing"},
	{decide.CreatePorts{}, true, "adds only the MACs the node lacks"},
	{decide.EndAllocation{}, true, "deletes the allocation only while it still names the node"},
	{decide.StoreInventory{}, true, "replaces the stored inspection data"},
	{decide.FakeDeploy{}, true, "no hardware"},
	{decide.SetPower{}, false, "power on and off are target states a second call finds reached, but a reboot target restarts the machine again: only on and off may move before their commit"},
	{decide.PrepareRamdisk{}, false, "a boot medium with the agent token records a fresh token first: a second run issues another"},
	{decide.AgentExecute{}, false, "the step is running on the agent: a second execute is refused as busy or runs the step twice"},
	{decide.AgentInstallBootloader{}, false, "an agent command writing the disk, as AgentExecute"},
	{decide.AgentPowerOff{}, false, "the agent is gone after it: a second call fails"},
	{decide.AgentFinalizeRescue{}, false, "the agent leaves its lookup loop after it"},
	{decide.DriverStep{}, false, "depends on the step (a firmware update, a RAID configuration)"},
	{decide.ManagementCall{}, false, "its answer belongs to the one API client waiting for it"},
}

// Every action the decision core can return is in the table, once.
func TestCrashRepeatCoversEveryAction(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "decide/actions.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "isAction" || fn.Recv == nil || len(fn.Recv.List) != 1 {
			continue
		}
		if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
			actions = append(actions, id.Name)
		}
	}
	if len(actions) == 0 {
		t.Fatal("decide/actions.go declares no isAction methods: the scan is wrong")
	}
	var listed []string
	for _, r := range crashRepeat {
		name := reflect.TypeOf(r.action).Name()
		if slices.Contains(listed, name) {
			t.Errorf("%s is listed twice", name)
		}
		listed = append(listed, name)
		if r.why == "" {
			t.Errorf("%s: no reason given", name)
		}
	}
	for _, a := range actions {
		if !slices.Contains(listed, a) {
			t.Errorf("action %s is not in crashRepeat: say whether it may run again after a crash", a)
		}
	}
	for _, l := range listed {
		if !slices.Contains(actions, l) {
			t.Errorf("crashRepeat lists %s, which is no longer an action", l)
		}
	}
}

// An action the executor already runs before the commit of the changes
// decided so far (deferrable) must be one a crash may repeat.
func TestDeferrableActionsAreRepeatable(t *testing.T) {
	for _, r := range crashRepeat {
		if deferrable(r.action) && !r.repeatable {
			t.Errorf("%T runs before its commit (deferrable) but may not run again after a crash: %s", r.action, r.why)
		}
	}
}
