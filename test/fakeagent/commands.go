package fakeagent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// outcome is how a command ends.
type outcome struct {
	result any
	err    error
	delay  time.Duration
	// mismatch, when set, ends the command CLEAN_VERSION_MISMATCH with it as details.
	mismatch string
	// after runs once the command has finished (power off, reboot…).
	after func()
	// run, when set, computes the outcome in the command's goroutine.
	run func() outcome
}

// spec prepares one command from its params: a *restError refuses it (400).
type spec struct {
	async   bool
	prepare func(params json.RawMessage) (outcome, error)
}

func (a *Agent) specs() map[string]map[string]spec {
	ok := func(v any) func(json.RawMessage) (outcome, error) {
		return func(json.RawMessage) (outcome, error) { return outcome{result: v}, nil }
	}
	gone := func(json.RawMessage) (outcome, error) {
		return outcome{after: func() {
			if a.cfg.OnPowerOff != nil {
				a.cfg.OnPowerOff()
			}
			a.Stop()
		}}, nil
	}
	stop := func(json.RawMessage) (outcome, error) { return outcome{after: func() { go a.Stop() }}, nil }
	out := map[string]map[string]spec{
		"standby": {
			"power_off":           {async: true, prepare: gone},
			"run_image":           {async: true, prepare: stop},
			"prepare_image":       {async: true, prepare: a.prepareImage},
			"sync":                {prepare: ok(nil)},
			"get_partition_uuids": {prepare: ok(proto.PartitionUUIDs{RootUUID: RootUUID})},
		},
		"image": {
			"install_bootloader": {async: true, prepare: a.installBootloader},
		},
		"log": {
			"collect_system_logs": {prepare: func(json.RawMessage) (outcome, error) {
				b, err := systemLogs()
				return outcome{result: proto.SystemLogsResult{SystemLogs: b}, err: err}, nil
			}},
		},
		"poll": {
			"get_hardware_info": {prepare: func(json.RawMessage) (outcome, error) { return outcome{result: a.cfg.Inventory}, nil }},
		},
		"rescue": {
			"finalize_rescue": {prepare: a.finalizeRescue},
		},
		"system": {
			"lockdown": {prepare: stop},
		},
	}
	for _, k := range []proto.StepKind{proto.StepClean, proto.StepDeploy, proto.StepService} {
		out[string(k)] = map[string]spec{
			"get_" + string(k) + "_steps":    {prepare: a.getSteps(k)},
			"execute_" + string(k) + "_step": {async: true, prepare: a.executeStep(k)},
		}
	}
	return out
}

func invalidParams(err error) *restError {
	return &restError{status: http.StatusBadRequest, typ: "InvalidCommandParamsError", message: "Invalid command parameters", details: err.Error()}
}

func (a *Agent) prepareImage(params json.RawMessage) (outcome, error) {
	var p proto.PrepareImageParams
	if err := json.Unmarshal(params, &p); err != nil {
		return outcome{}, invalidParams(err)
	}
	if p.ImageInfo.ID == "" || len(p.ImageInfo.URLs) == 0 {
		return outcome{}, invalidParams(fmt.Errorf("image_info needs id and urls"))
	}
	return outcome{result: "image (" + p.ImageInfo.ID + ") written to device"}, nil
}

func (a *Agent) installBootloader(params json.RawMessage) (outcome, error) {
	var p proto.InstallBootloaderParams
	if err := json.Unmarshal(params, &p); err != nil {
		return outcome{}, invalidParams(err)
	}
	return outcome{}, nil
}

func (a *Agent) finalizeRescue(params json.RawMessage) (outcome, error) {
	var p proto.FinalizeRescueParams
	if err := json.Unmarshal(params, &p); err != nil || p.RescuePassword == "" {
		return outcome{}, invalidParams(fmt.Errorf("rescue_password is required"))
	}
	// The real agent stops heartbeating once the rescue password is set.
	return outcome{after: func() { go a.Stop() }}, nil
}

func (a *Agent) getSteps(kind proto.StepKind) func(json.RawMessage) (outcome, error) {
	return func(params json.RawMessage) (outcome, error) {
		var p proto.GetStepsParams
		if err := json.Unmarshal(params, &p); err != nil {
			return outcome{}, invalidParams(err)
		}
		steps := append([]proto.Step{}, a.steps[kind]...)
		return outcome{result: proto.StepsResult{
			Kind:                   kind,
			Steps:                  map[string][]proto.Step{ManagerClass: steps},
			HardwareManagerVersion: HardwareManagerVersion(),
		}}, nil
	}
}

func (a *Agent) executeStep(kind proto.StepKind) func(json.RawMessage) (outcome, error) {
	return func(params json.RawMessage) (outcome, error) {
		var p proto.ExecuteStepParams
		if err := p.UnmarshalFor(kind, params); err != nil {
			return outcome{}, invalidParams(err)
		}
		var raw struct {
			Step json.RawMessage `json:"step"`
		}
		_ = json.Unmarshal(params, &raw)
		if p.Version != nil && !maps.Equal(p.Version, HardwareManagerVersion()) {
			return outcome{mismatch: fmt.Sprintf("Current: %v, Received: %v", HardwareManagerVersion(), p.Version)}, nil
		}
		name := p.Step.Name()
		known := false
		for _, s := range a.steps[kind] {
			if s.Step == name && s.Interface == p.Step.Interface {
				known = true
			}
		}
		a.mu.Lock()
		a.executed[kind] = append(a.executed[kind], name)
		a.mu.Unlock()
		if !known {
			return outcome{err: &restError{status: http.StatusBadRequest, typ: "HardwareManagerMethodNotFound",
				message: "No HardwareManager found to handle method", details: fmt.Sprintf("Could not find method: %s", name)}}, nil
		}
		// The behavior runs in the command's goroutine, so it may block.
		return outcome{run: func() outcome {
			var res any
			var err error
			var delay time.Duration
			if a.cfg.StepBehavior != nil {
				res, err, delay = a.cfg.StepBehavior(string(kind), name, p.Step.Args)
			}
			if err != nil {
				err = fmt.Errorf("Error performing %s step %s: %w", kind, name, err)
			}
			return outcome{delay: delay, err: err, result: map[string]any{
				string(kind) + "_result": res,
				string(kind) + "_step":   raw.Step,
			}}
		}}, nil
	}
}

// systemLogs is a tiny base64 tar.gz, as log.collect_system_logs returns.
func systemLogs() (string, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	data := []byte("fakeagent: nothing happened\n")
	if err := tw.WriteHeader(&tar.Header{Name: "journal", Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return "", err
	}
	if _, err := tw.Write(data); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// execute starts name with params following the real agent's rules.
func (a *Agent) execute(name string, params json.RawMessage) (*command, error) {
	ext, cmd, ok := proto.SplitCommandName(name)
	if !ok {
		return nil, &restError{status: http.StatusBadRequest, typ: "InvalidCommandError", message: "Invalid command",
			details: "Command name must be of the form <extension>.<name>"}
	}
	cmds, ok := a.specs()[ext]
	if !ok {
		return nil, &restError{status: http.StatusNotFound, typ: "RequestedObjectNotFoundError", message: "Not found",
			details: fmt.Sprintf("Extension with id %s not found.", ext)}
	}
	sp, ok := cmds[cmd]
	if !ok {
		return nil, &restError{status: http.StatusNotFound, typ: "RequestedObjectNotFoundError", message: "Not found",
			details: fmt.Sprintf("Command with id %s.%s not found.", ext, cmd)}
	}
	a.mu.Lock()
	if n := len(a.cmds); n > 0 && a.cmds[n-1].res.CommandStatus == proto.CommandRunning {
		last := a.cmds[n-1].res.CommandName
		a.mu.Unlock()
		return nil, &restError{status: http.StatusConflict, typ: "AgentIsBusy", message: "Agent is busy",
			details: fmt.Sprintf("Command %s is still running", last)}
	}
	a.mu.Unlock()
	// prepare may record (Executed) and so takes the lock itself; the agent
	// is single-controller, so a race between two POSTs is not modelled.
	o, err := sp.prepare(params)
	if err != nil {
		return nil, err
	}
	c := &command{done: make(chan struct{}), res: proto.CommandResult{ID: newID(), CommandName: cmd, CommandStatus: proto.CommandRunning}}
	a.mu.Lock()
	a.cmds = append(a.cmds, c)
	a.mu.Unlock()
	if sp.async {
		go a.finish(c, o, true)
	} else {
		a.finish(c, o, false)
	}
	return c, nil
}

// finish ends c with o after o.delay (abandoned if the agent stops first).
func (a *Agent) finish(c *command, o outcome, async bool) {
	if o.run != nil {
		o = o.run()
	}
	if o.delay > 0 && !a.sleep(o.delay) {
		return
	}
	a.mu.Lock()
	switch {
	case o.mismatch != "":
		c.res.CommandStatus = proto.CommandCleanVersionMismatch
		c.res.CommandError = &proto.CommandError{Type: "VersionMismatch", Code: http.StatusConflict,
			Message: "Hardware managers version mismatch, reload agent with correct version", Details: o.mismatch}
	case o.err != nil:
		c.res.CommandStatus = proto.CommandFailed
		if re, ok := o.err.(*restError); ok {
			c.res.CommandError = &proto.CommandError{Type: re.typ, Code: re.status, Message: re.message, Details: re.details}
		} else {
			c.res.CommandError = &proto.CommandError{Type: "CommandExecutionError", Code: http.StatusInternalServerError,
				Message: "Command execution failed", Details: o.err.Error()}
		}
	default:
		r := o.result
		if s, ok := r.(string); ok {
			r = map[string]string{"result": c.res.CommandName + ": " + s}
		}
		b, err := json.Marshal(r)
		if err != nil {
			c.res.CommandStatus = proto.CommandFailed
			c.res.CommandError = &proto.CommandError{Type: "CommandExecutionError", Code: http.StatusInternalServerError,
				Message: "Command execution failed", Details: "encode result: " + err.Error()}
		} else {
			c.res.CommandStatus = proto.CommandSucceeded
			c.res.CommandResult = b
		}
	}
	a.mu.Unlock()
	close(c.done)
	if o.after != nil {
		if async {
			o.after()
		} else {
			go o.after()
		}
		return
	}
	if async {
		a.Heartbeat()
	}
}
