package agentclient

import (
	"encoding/json"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func stepCall(name string, args map[string]any) proto.StepCall {
	return proto.StepCall{Step: proto.Step{Step: name, Interface: "deploy", Priority: 99}, Args: args}
}

func cmd(name string, status proto.CommandStatus, result any) proto.CommandResult {
	c := proto.CommandResult{ID: name, CommandName: name, CommandStatus: status}
	if result != nil {
		c.CommandResult = raw(result)
	}
	return c
}

func stepResult(kind proto.StepKind, s proto.StepCall, res any) proto.ExecuteStepResult {
	return proto.ExecuteStepResult{Kind: kind, Step: s, Result: res}
}

func TestLastStepStatus(t *testing.T) {
	cur := stepCall("erase_devices_metadata", nil)
	prev := stepCall("erase_devices", nil)
	withArgs := stepCall("erase_devices_metadata", map[string]any{"n": 1})
	failed := cmd("execute_clean_step", proto.CommandFailed, nil)
	failed.CommandError = &proto.CommandError{Type: "CommandExecutionError", Message: "Command execution failed", Details: "disk on fire"}
	msgOnly := cmd("execute_clean_step", proto.CommandFailed, nil)
	msgOnly.CommandError = &proto.CommandError{Message: "Command execution failed"}
	noErr := cmd("execute_clean_step", proto.CommandFailed, nil)
	mismatch := cmd("execute_clean_step", proto.CommandCleanVersionMismatch, nil)
	mismatch.CommandError = &proto.CommandError{Type: "VersionMismatch", Message: "Hardware managers version mismatch", Details: "Current: a, Received: b"}
	getSteps := cmd("get_clean_steps", proto.CommandSucceeded, proto.StepsResult{Kind: proto.StepClean})

	cases := []struct {
		name    string
		kind    proto.StepKind
		current proto.StepCall
		cmds    []proto.CommandResult
		want    StepState
		err     string
		result  any
	}{
		{name: "no commands", cmds: nil, want: StepFresh},
		{name: "only get_clean_steps", cmds: []proto.CommandResult{getSteps, getSteps}, want: StepFresh},
		{name: "get_deploy_steps is not fresh for clean", cmds: []proto.CommandResult{cmd("get_deploy_steps", proto.CommandSucceeded, nil)}, want: StepWait},
		{name: "last is get_clean_steps after a step", cmds: []proto.CommandResult{cmd("execute_clean_step", proto.CommandSucceeded, stepResult(proto.StepClean, prev, nil)), getSteps}, want: StepWait},
		{name: "other command last", cmds: []proto.CommandResult{getSteps, cmd("get_partition_uuids", proto.CommandSucceeded, nil)}, want: StepWait},
		{name: "running", cmds: []proto.CommandResult{getSteps, cmd("execute_clean_step", proto.CommandRunning, nil)}, want: StepWait},
		{name: "running with progress", cmds: []proto.CommandResult{getSteps, cmd("execute_clean_step", proto.CommandRunning, proto.CommandProgressResult{Progress: proto.CommandProgress{BytesDone: 1}})}, want: StepWait},
		{name: "previous step echoed", cmds: []proto.CommandResult{getSteps, cmd("execute_clean_step", proto.CommandSucceeded, stepResult(proto.StepClean, prev, nil))}, want: StepWait},
		{name: "same name other args", current: withArgs, cmds: []proto.CommandResult{cmd("execute_clean_step", proto.CommandSucceeded, stepResult(proto.StepClean, cur, nil))}, want: StepWait},
		{name: "no echo", cmds: []proto.CommandResult{cmd("execute_clean_step", proto.CommandSucceeded, map[string]any{"clean_result": nil})}, want: StepWait},
		{name: "null result", cmds: []proto.CommandResult{cmd("execute_clean_step", proto.CommandSucceeded, nil)}, want: StepWait},
		{name: "succeeded", cmds: []proto.CommandResult{getSteps, cmd("execute_clean_step", proto.CommandSucceeded, stepResult(proto.StepClean, cur, "done"))}, want: StepSucceeded, result: "done"},
		{name: "succeeded args compared as JSON", current: withArgs, cmds: []proto.CommandResult{cmd("execute_clean_step", proto.CommandSucceeded, stepResult(proto.StepClean, stepCall("erase_devices_metadata", map[string]any{"n": 1.0}), nil))}, want: StepSucceeded},
		{name: "priority not compared", cmds: []proto.CommandResult{cmd("execute_clean_step", proto.CommandSucceeded, stepResult(proto.StepClean, proto.StepCall{Step: proto.Step{Step: "erase_devices_metadata", Interface: "deploy", Priority: 5}}, nil))}, want: StepSucceeded},
		{name: "other interface", cmds: []proto.CommandResult{cmd("execute_clean_step", proto.CommandSucceeded, stepResult(proto.StepClean, proto.StepCall{Step: proto.Step{Step: "erase_devices_metadata", Interface: "raid"}}, nil))}, want: StepWait},
		{name: "failed with details", cmds: []proto.CommandResult{getSteps, failed}, want: StepFailed, err: "disk on fire"},
		{name: "failed message only", cmds: []proto.CommandResult{msgOnly}, want: StepFailed, err: "Command execution failed"},
		{name: "failed without error", cmds: []proto.CommandResult{noErr}, want: StepFailed, err: "unknown error (command_status FAILED)"},
		{name: "version mismatch", cmds: []proto.CommandResult{getSteps, mismatch}, want: StepVersionMismatch, err: "Current: a, Received: b"},
		{name: "unknown status", cmds: []proto.CommandResult{cmd("execute_clean_step", "EXPLODED", nil)}, want: StepFailed},
		{name: "deploy kind", kind: proto.StepDeploy, cmds: []proto.CommandResult{cmd("get_deploy_steps", proto.CommandSucceeded, nil), cmd("execute_deploy_step", proto.CommandSucceeded, stepResult(proto.StepDeploy, cur, nil))}, want: StepSucceeded},
		{name: "deploy kind ignores clean command", kind: proto.StepDeploy, cmds: []proto.CommandResult{cmd("execute_clean_step", proto.CommandFailed, nil)}, want: StepWait},
		{name: "deploy result with clean echo", kind: proto.StepDeploy, cmds: []proto.CommandResult{cmd("execute_deploy_step", proto.CommandSucceeded, stepResult(proto.StepClean, cur, nil))}, want: StepWait},
		{name: "service fresh", kind: proto.StepService, cmds: []proto.CommandResult{cmd("get_service_steps", proto.CommandSucceeded, nil)}, want: StepFresh},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kind := tc.kind
			if kind == "" {
				kind = proto.StepClean
			}
			current := tc.current
			if current.Step.Step == "" {
				current = cur
			}
			got := LastStepStatus(tc.cmds, kind, current)
			if got.State != tc.want {
				t.Fatalf("state %v, want %v (%+v)", got.State, tc.want, got)
			}
			if tc.err != "" && got.Error != tc.err {
				t.Errorf("error %q, want %q", got.Error, tc.err)
			}
			if tc.want == StepSucceeded {
				if got.Result.Kind != kind || got.Result.Step.Name() != current.Name() || got.Result.Result != tc.result {
					t.Errorf("result %+v", got.Result)
				}
			}
			if n := len(tc.cmds); n > 0 && got.Command.ID != tc.cmds[n-1].ID {
				t.Errorf("command %q, want the last", got.Command.ID)
			}
		})
	}
}

func TestStepStateString(t *testing.T) {
	for s, want := range map[StepState]string{StepWait: "wait", StepFresh: "fresh", StepSucceeded: "succeeded", StepFailed: "failed", StepVersionMismatch: "version mismatch", 99: "unknown"} {
		if s.String() != want {
			t.Errorf("%d: %q", s, s.String())
		}
	}
}

// FuzzLastStepStatus feeds agent-controlled command lists: no panic, and a
// verdict of success always carries the step asked for.
func FuzzLastStepStatus(f *testing.F) {
	f.Add(`{"commands":[]}`)
	f.Add(`{"commands":[{"id":"1","command_name":"get_clean_steps","command_status":"SUCCEEDED","command_error":null,"command_result":{"clean_steps":{}}}]}`)
	f.Add(`{"commands":[{"command_name":"execute_clean_step","command_status":"SUCCEEDED","command_result":{"clean_result":null,"clean_step":{"step":"erase_devices","interface":"deploy"}}}]}`)
	f.Add(`{"commands":[{"command_name":"execute_clean_step","command_status":"FAILED","command_error":{"message":"m","details":"d"}}]}`)
	f.Add(`{"commands":[{"command_name":"execute_clean_step","command_status":"SUCCEEDED","command_result":{"clean_step":7}}]}`)
	current := proto.StepCall{Step: proto.Step{Step: "erase_devices", Interface: "deploy"}}
	f.Fuzz(func(t *testing.T, body string) {
		var l proto.CommandList
		if json.Unmarshal([]byte(body), &l) != nil {
			return
		}
		st := LastStepStatus(l.Commands, proto.StepClean, current)
		if st.State == StepSucceeded && !SameStep(st.Result.Step, current) {
			t.Errorf("succeeded with step %+v", st.Result.Step)
		}
		if (st.State == StepFailed || st.State == StepVersionMismatch) && st.Error == "" {
			t.Error("failure without a message")
		}
	})
}
