package agentclient

import (
	"encoding/json"
	"reflect"

	"github.com/kilnhq/kiln/proto"
)

// StepState is what the agent's command list says about the step the
// controller asked for.
type StepState int

// Step states, see LastStepStatus.
const (
	// StepWait: the step has not finished (or not started) yet; check again
	// on the next heartbeat.
	StepWait StepState = iota
	// StepFresh: the list has only get_X_steps commands or none: the agent
	// (re)booted since the step was sent; continue after a reboot.
	StepFresh
	// StepSucceeded: the step ended well; Result holds its result.
	StepSucceeded
	// StepFailed: the step failed; Error says why.
	StepFailed
	// StepVersionMismatch: the agent's hardware managers differ from the
	// cached steps: fetch the steps again (automated cleaning restarts).
	StepVersionMismatch
)

func (s StepState) String() string {
	switch s {
	case StepWait:
		return "wait"
	case StepFresh:
		return "fresh"
	case StepSucceeded:
		return "succeeded"
	case StepFailed:
		return "failed"
	case StepVersionMismatch:
		return "version mismatch"
	}
	return "unknown"
}

// StepStatus is LastStepStatus's verdict.
type StepStatus struct {
	State StepState
	// Command is the last command of the list (zero if none).
	Command proto.CommandResult
	// Result is the decoded X_result/X_step of a succeeded step.
	Result proto.ExecuteStepResult
	// Error is the agent's error message (details, else message) for
	// StepFailed and StepVersionMismatch.
	Error string
}

// LastStepStatus reads the agent's command list (oldest first, from
// Commands) on a heartbeat while the controller waits for step current of
// kind, the way Ironic's conductor does:
//   - no commands, or only get_X_steps: StepFresh (the agent rebooted);
//   - last command not execute_X_step, or RUNNING: StepWait;
//   - SUCCEEDED but echoing another step than current: StepWait (the new
//     command has not started yet);
//   - CLEAN_VERSION_MISMATCH: StepVersionMismatch;
//   - FAILED: StepFailed with the error;
//   - SUCCEEDED with current echoed: StepSucceeded with the result.
func LastStepStatus(cmds []proto.CommandResult, kind proto.StepKind, current proto.StepCall) StepStatus {
	get, exec := "get_"+string(kind)+"_steps", "execute_"+string(kind)+"_step"
	fresh := true
	for _, c := range cmds {
		if c.CommandName != get {
			fresh = false
			break
		}
	}
	if fresh {
		st := StepStatus{State: StepFresh}
		if len(cmds) > 0 {
			st.Command = cmds[len(cmds)-1]
		}
		return st
	}
	last := cmds[len(cmds)-1]
	st := StepStatus{State: StepWait, Command: last}
	if last.CommandName != exec {
		return st
	}
	switch last.CommandStatus {
	case proto.CommandRunning:
		return st
	case proto.CommandCleanVersionMismatch:
		st.State, st.Error = StepVersionMismatch, CommandErrorMessage(last)
		return st
	case proto.CommandFailed:
		st.State, st.Error = StepFailed, CommandErrorMessage(last)
		return st
	case proto.CommandSucceeded:
		var r proto.ExecuteStepResult
		if err := json.Unmarshal(last.CommandResult, &r); err != nil || r.Kind != kind {
			// No echo we can read: not the step we asked for.
			return st
		}
		if !SameStep(r.Step, current) {
			return st
		}
		st.State, st.Result = StepSucceeded, r
		return st
	}
	// An unknown status: treat as failed rather than wait forever.
	st.State, st.Error = StepFailed, "unexpected command_status "+string(last.CommandStatus)+": "+CommandErrorMessage(last)
	return st
}

// SameStep reports whether the agent's echo is the step the controller sent:
// same interface, name and args (compared as JSON values, so 1 and 1.0 agree).
// Priority and flags are not compared: the controller may have overridden
// the priority the agent advertised.
func SameStep(echo, sent proto.StepCall) bool {
	if echo.Interface != sent.Interface || echo.Step.Step != sent.Step.Step {
		return false
	}
	if sent.Image != nil {
		return jsonEqual(echo.Args, sent.Image)
	}
	return jsonEqual(echo.Args, sent.Args)
}

// jsonEqual compares the agent's echo of args with what was sent (a map,
// or write_image's typed arguments).
func jsonEqual(a map[string]any, b any) bool {
	if m, ok := b.(map[string]any); ok && len(a) == 0 && len(m) == 0 {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
