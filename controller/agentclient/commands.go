package agentclient

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// Typed wrappers over Execute, one per command the conductor sends. The
// synchronous ones (wait=true) turn a FAILED or CLEAN_VERSION_MISMATCH result
// into a *CommandFailedError; the asynchronous ones return the result as the
// POST got it (usually RUNNING, possibly already ended) for the caller to
// follow on heartbeats; only a refused request is an error for them.

// StepCommands gives the get_X_steps and execute_X_step command names of kind.
func StepCommands(kind proto.StepKind) (get, execute string, err error) {
	switch kind {
	case proto.StepClean:
		return proto.CmdGetCleanSteps, proto.CmdExecuteCleanStep, nil
	case proto.StepDeploy:
		return proto.CmdGetDeploySteps, proto.CmdExecuteDeployStep, nil
	case proto.StepService:
		return proto.CmdGetServiceSteps, proto.CmdExecuteServiceStep, nil
	}
	return "", "", fmt.Errorf("unknown step kind %q", kind)
}

// runSync executes name with wait=true and requires SUCCEEDED; out (if not
// nil) receives the command_result.
func (c *Client) runSync(ctx context.Context, a Agent, name string, params any, out any) (proto.CommandResult, error) {
	res, err := c.Execute(ctx, a, name, params, true)
	if err != nil {
		return res, err
	}
	op := "execute " + name
	if res.CommandStatus == proto.CommandRunning {
		// Only when a retried POST was found running on the agent.
		if res, err = c.WaitCommand(ctx, a, op, res); err != nil {
			return res, err
		}
	}
	if res.CommandStatus != proto.CommandSucceeded {
		return res, &CommandFailedError{Op: op, URL: a.URL, Result: res}
	}
	if out != nil {
		if err := json.Unmarshal(res.CommandResult, out); err != nil {
			return res, &Error{Op: op, URL: a.URL, Err: fmt.Errorf("decode command_result: %w", err)}
		}
	}
	return res, nil
}

// runAsync executes name with wait=false. Whether the answer is still
// RUNNING or already ended is a race on the agent's side, so the status is
// not judged here: follow the command (LastStepStatus, WaitCommand).
func (c *Client) runAsync(ctx context.Context, a Agent, name string, params any) (proto.CommandResult, error) {
	return c.Execute(ctx, a, name, params, false)
}

// stepParams are the params of get_X_steps and execute_X_step as the
// agent decodes them (proto.GetStepsParams, proto.ExecuteStepParams); the
// version map goes under "<kind>_version", and only when one was cached.
type stepParams struct {
	Step           *proto.StepCall   `json:"step,omitempty"`
	Node           any               `json:"node"`
	Ports          any               `json:"ports"`
	CleanVersion   map[string]string `json:"clean_version,omitzero"`
	DeployVersion  map[string]string `json:"deploy_version,omitzero"`
	ServiceVersion map[string]string `json:"service_version,omitzero"`
}

// orEmpty keeps node {} and ports [] on the wire when the caller has none:
// IPA indexes into both.
func orEmpty(node, ports any) (any, any) {
	if node == nil {
		node = map[string]any{}
	}
	if ports == nil {
		ports = []any{}
	}
	return node, ports
}

// GetSteps is X.get_X_steps(node, ports), synchronous. node and ports are the
// node's and its ports' full JSON views (secrets masked), as Ironic sends.
func (c *Client) GetSteps(ctx context.Context, a Agent, kind proto.StepKind, node, ports any) (proto.StepsResult, error) {
	get, _, err := StepCommands(kind)
	if err != nil {
		return proto.StepsResult{}, &Error{Op: "get steps", URL: a.URL, Err: err}
	}
	node, ports = orEmpty(node, ports)
	var sr proto.StepsResult
	if _, err := c.runSync(ctx, a, get, stepParams{Node: node, Ports: ports}, &sr); err != nil {
		return proto.StepsResult{}, err
	}
	if sr.Kind != kind {
		return proto.StepsResult{}, &Error{Op: "execute " + get, URL: a.URL, Err: fmt.Errorf("result lists %s steps, want %s", sr.Kind, kind)}
	}
	return sr, nil
}

// ExecuteStep is X.execute_X_step(step, node, ports, X_version), asynchronous:
// it returns the result as posted (RUNNING, or already ended); follow it with Commands and LastStepStatus
// on the agent's heartbeats. versions is the hardware_manager_version map
// cached with the steps (nil: none sent, the agent skips its check).
func (c *Client) ExecuteStep(ctx context.Context, a Agent, kind proto.StepKind, step proto.StepCall, node, ports any, versions map[string]string) (proto.CommandResult, error) {
	_, exec, err := StepCommands(kind)
	if err != nil {
		return proto.CommandResult{}, &Error{Op: "execute step", URL: a.URL, Err: err}
	}
	node, ports = orEmpty(node, ports)
	params := stepParams{Step: &step, Node: node, Ports: ports}
	switch kind {
	case proto.StepClean:
		params.CleanVersion = versions
	case proto.StepDeploy:
		params.DeployVersion = versions
	case proto.StepService:
		params.ServiceVersion = versions
	}
	return c.runAsync(ctx, a, exec, params)
}

// PowerOff is standby.power_off, asynchronous (the agent powers the machine
// off; the conductor then watches the BMC). Only a refused request is an error.
func (c *Client) PowerOff(ctx context.Context, a Agent) error {
	_, err := c.runAsync(ctx, a, proto.CmdPowerOff, nil)
	return err
}

// Sync is standby.sync: flush the agent's file system buffers.
func (c *Client) Sync(ctx context.Context, a Agent) error {
	_, err := c.runSync(ctx, a, proto.CmdSync, nil, nil)
	return err
}

// GetPartitionUUIDs is standby.get_partition_uuids, synchronous.
func (c *Client) GetPartitionUUIDs(ctx context.Context, a Agent) (proto.PartitionUUIDs, error) {
	var p proto.PartitionUUIDs
	_, err := c.runSync(ctx, a, proto.CmdGetPartitionUUIDs, nil, &p)
	return p, err
}

// InstallBootloader is image.install_bootloader: posted with wait=false, then
// polled (WaitCommand: at most PollAttempts times, every PollInterval once
// the first quick polls found it running) until it ends, as Ironic does. It returns the final result; FAILED is a *CommandFailedError.
func (c *Client) InstallBootloader(ctx context.Context, a Agent, p proto.InstallBootloaderParams) (proto.CommandResult, error) {
	res, err := c.runAsync(ctx, a, proto.CmdInstallBootloader, p)
	if err != nil {
		return res, err
	}
	return c.WaitCommand(ctx, a, "execute "+proto.CmdInstallBootloader, res)
}

// WaitCommand polls GET /v1/commands/{id} (after 100 ms, then twice as
// long each time up to PollInterval; at most PollAttempts times) until res
// is no longer RUNNING. A heartbeat of the agent (a.Heartbeats) ends a
// pause early, once per pause: that poll is not counted, and when the
// command still runs the pause is taken again in full, so a chatty agent
// costs at most one extra poll per pause. op names the command for
// errors. FAILED or CLEAN_VERSION_MISMATCH is a *CommandFailedError.
func (c *Client) WaitCommand(ctx context.Context, a Agent, op string, res proto.CommandResult) (proto.CommandResult, error) {
	beats := a.Heartbeats
	for n := 0; res.CommandStatus == proto.CommandRunning; {
		if n >= c.opts.PollAttempts {
			return res, &Error{Op: op, URL: a.URL, Err: fmt.Errorf("still running after %d polls", n)}
		}
		t := time.NewTimer(pollWait(n, c.firstPoll, c.opts.PollInterval))
		select {
		case <-ctx.Done():
			t.Stop()
			return res, &Error{Op: op, URL: a.URL, Err: ctx.Err()}
		case <-t.C:
			n++
			beats = a.Heartbeats
		case <-beats:
			t.Stop()
			beats = nil
		}
		r, err := c.Command(ctx, a, res.ID, false)
		if err != nil {
			return res, err
		}
		res = r
	}
	if res.CommandStatus != proto.CommandSucceeded {
		return res, &CommandFailedError{Op: op, URL: a.URL, Result: res}
	}
	return res, nil
}

// firstPoll is WaitCommand's first pause: most commands it follows
// (install_bootloader on a whole-disk image) end within a second, and a
// deploy should not wait a whole PollInterval for them.
const firstPoll = 100 * time.Millisecond

// pollWait is the pause before poll n: first, doubling up to interval.
func pollWait(n int, first, interval time.Duration) time.Duration {
	if n >= 16 {
		return interval
	}
	return min(first<<n, interval)
}

// CollectSystemLogs is log.collect_system_logs, synchronous.
func (c *Client) CollectSystemLogs(ctx context.Context, a Agent) (proto.SystemLogsResult, error) {
	var r proto.SystemLogsResult
	_, err := c.runSync(ctx, a, proto.CmdCollectSystemLogs, nil, &r)
	return r, err
}

// GetHardwareInfo is poll.get_hardware_info, synchronous: the inventory as
// the agent sent it (decode into proto.Inventory).
func (c *Client) GetHardwareInfo(ctx context.Context, a Agent) (json.RawMessage, error) {
	res, err := c.runSync(ctx, a, proto.CmdGetHardwareInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	return res.CommandResult, nil
}

// FinalizeRescue is rescue.finalize_rescue, synchronous: the agent sets the
// rescue user's password (hashed: password is a crypt hash) and stops.
func (c *Client) FinalizeRescue(ctx context.Context, a Agent, password string, hashed bool) error {
	_, err := c.runSync(ctx, a, proto.CmdFinalizeRescue, proto.FinalizeRescueParams{RescuePassword: password, Hashed: hashed}, nil)
	return err
}

// Lockdown is system.lockdown, synchronous: the agent stops serving and
// disables itself (the last call before leaving a machine running it).
func (c *Client) Lockdown(ctx context.Context, a Agent) error {
	_, err := c.runSync(ctx, a, proto.CmdLockdown, nil, nil)
	return err
}
