package agent

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

// RESTError is an error with IPA's serialized shape; its Status is also the
// HTTP status when it is returned before a command starts.
type RESTError struct {
	Status  int
	Type    string
	Message string
	Details string
}

func (e *RESTError) Error() string {
	if e.Details == "" {
		return e.Message
	}
	return e.Message + ": " + e.Details
}

func (e *RESTError) commandError() *proto.CommandError {
	return &proto.CommandError{Type: e.Type, Code: e.Status, Message: e.Message, Details: e.Details}
}

// ErrNotAvailable is wrapped by commands whose hardware part is not wired in.
var ErrNotAvailable = errors.New("not available in this agent build")

func invalidParams(err error) *RESTError {
	return &RESTError{Status: http.StatusBadRequest, Type: "InvalidCommandParamsError", Message: "Invalid command parameters", Details: err.Error()}
}

// runFunc runs a prepared command; progress may be called any time.
type runFunc func(ctx context.Context, progress func(proto.CommandProgress)) (any, error)

// cmdSpec is one command: async ones return RUNNING at once. prepare decodes
// and validates params (a *RESTError → HTTP 400) and returns the work.
type cmdSpec struct {
	async   bool
	prepare func(params json.RawMessage) (runFunc, error)
}

// Command is one command's life: its result changes until Done is closed.
type Command struct {
	mu       sync.Mutex
	res      proto.CommandResult
	progress *proto.CommandProgress
	done     chan struct{}
}

// Done is closed when the command has finished.
func (c *Command) Done() <-chan struct{} { return c.done }

// Result is the command's current result; a RUNNING command that reports
// progress carries {"progress": proto.CommandProgress} as command_result.
func (c *Command) Result() proto.CommandResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.res
	if r.CommandStatus == proto.CommandRunning && c.progress != nil {
		b, _ := json.Marshal(proto.CommandProgressResult{Progress: *c.progress})
		r.CommandResult = b
	}
	return r
}

func (c *Command) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.res.CommandStatus == proto.CommandRunning
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Execute starts command name ("ext.cmd") with params (a JSON object). It
// returns a *RESTError for requests that must not start: 400 bad name or
// params, 404 unknown extension or command, 409 while another command runs.
// Sync commands have finished when Execute returns; wait on Done for async ones.
func (a *Agent) Execute(name string, params json.RawMessage) (*Command, error) {
	ext, cmd, ok := proto.SplitCommandName(name)
	if !ok {
		return nil, &RESTError{Status: http.StatusBadRequest, Type: "InvalidCommandError", Message: "Invalid command",
			Details: "Command name must be of the form <extension>.<name>"}
	}
	cmds, ok := a.exts[ext]
	if !ok {
		return nil, &RESTError{Status: http.StatusNotFound, Type: "RequestedObjectNotFoundError", Message: "Not found",
			Details: fmt.Sprintf("Extension with id %s not found.", ext)}
	}
	spec, ok := cmds[cmd]
	if !ok {
		return nil, &RESTError{Status: http.StatusNotFound, Type: "RequestedObjectNotFoundError", Message: "Not found",
			Details: fmt.Sprintf("Command with id %s.%s not found.", ext, cmd)}
	}
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}

	a.cmdMu.Lock()
	if n := len(a.cmds); n > 0 && a.cmds[n-1].running() {
		last := a.cmds[n-1].Result().CommandName
		a.cmdMu.Unlock()
		return nil, &RESTError{Status: http.StatusConflict, Type: "AgentIsBusy", Message: "Agent is busy",
			Details: fmt.Sprintf("Command %s is still running", last)}
	}
	run, err := spec.prepare(params)
	if err != nil {
		a.cmdMu.Unlock()
		var re *RESTError
		if errors.As(err, &re) {
			return nil, re
		}
		return nil, invalidParams(err)
	}
	c := &Command{done: make(chan struct{}), res: proto.CommandResult{
		ID: newID(), CommandName: cmd, CommandStatus: proto.CommandRunning}}
	a.cmds = append(a.cmds, c)
	a.byID[c.res.ID] = c
	a.trimCommands()
	a.cmdMu.Unlock()

	a.log.Info("command started", "command", name, "id", c.res.ID, "async", spec.async)
	if spec.async {
		go a.runCommand(c, name, run, true)
	} else {
		a.runCommand(c, name, run, false)
	}
	return c, nil
}

// runCommand runs a command, never letting a panic escape (the agent is the
// ramdisk's only payload), and heartbeats at once when an async one finishes.
func (a *Agent) runCommand(c *Command, name string, run runFunc, async bool) {
	var (
		result any
		err    error
	)
	func() {
		defer func() {
			if p := recover(); p != nil {
				a.log.Error("command panicked", "command", name, "panic", p, "stack", string(debug.Stack()))
				err = fmt.Errorf("internal error: panic: %v", p)
			}
		}()
		a.mu.Lock()
		ctx := a.baseCtx
		a.mu.Unlock()
		result, err = run(ctx, func(p proto.CommandProgress) {
			c.mu.Lock()
			c.progress = &p
			c.mu.Unlock()
		})
	}()
	c.mu.Lock()
	var vm *steps.VersionMismatchError
	switch {
	case errors.As(err, &vm):
		c.res.CommandStatus = proto.CommandCleanVersionMismatch
		c.res.CommandError = &proto.CommandError{Type: "VersionMismatch", Code: http.StatusConflict,
			Message: "Hardware managers version mismatch, reload agent with correct version", Details: vm.Error()}
	case err != nil:
		c.res.CommandStatus = proto.CommandFailed
		var re *RESTError
		if errors.As(err, &re) {
			c.res.CommandError = re.commandError()
		} else {
			c.res.CommandError = &proto.CommandError{Type: "CommandExecutionError", Code: http.StatusInternalServerError,
				Message: "Command execution failed", Details: err.Error()}
		}
	default:
		if s, ok := result.(string); ok {
			if async {
				s = c.res.CommandName + ": " + s
			}
			result = map[string]string{"result": s}
		}
		b, merr := json.Marshal(result)
		if merr != nil {
			c.res.CommandStatus = proto.CommandFailed
			c.res.CommandError = &proto.CommandError{Type: "CommandExecutionError", Code: http.StatusInternalServerError,
				Message: "Command execution failed", Details: "encode result: " + merr.Error()}
		} else {
			c.res.CommandStatus = proto.CommandSucceeded
			c.res.CommandResult = b
		}
	}
	status := c.res.CommandStatus
	c.mu.Unlock()
	close(c.done)
	lvl := slog.LevelInfo
	if status != proto.CommandSucceeded {
		lvl = slog.LevelError
	}
	a.log.Log(context.Background(), lvl, "command finished", "command", name, "id", c.res.ID, "status", status, "err", err)
	if async {
		a.ForceHeartbeat()
	}
}

// maxCommands bounds the kept results (a log collection result is megabytes).
const maxCommands = 100

// trimCommands forgets the oldest results beyond maxCommands; cmdMu is held.
func (a *Agent) trimCommands() {
	for len(a.cmds) > maxCommands {
		delete(a.byID, a.cmds[0].res.ID)
		a.cmds[0] = nil
		a.cmds = a.cmds[1:]
	}
}

// Commands returns the command results, oldest first (the last 100).
func (a *Agent) Commands() []proto.CommandResult {
	a.cmdMu.Lock()
	defer a.cmdMu.Unlock()
	out := make([]proto.CommandResult, len(a.cmds))
	for i, c := range a.cmds {
		out[i] = c.Result()
	}
	return out
}

func (a *Agent) command(id string) *Command {
	a.cmdMu.Lock()
	defer a.cmdMu.Unlock()
	return a.byID[id]
}

// decodeParams decodes a params object strictly enough to catch type errors.
func decodeParams(params json.RawMessage, v any) error {
	if err := json.Unmarshal(params, v); err != nil {
		return invalidParams(err)
	}
	return nil
}
