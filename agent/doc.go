// Package agent is kiln-agent's runtime: configuration from the kernel command
// line, lookup and heartbeat against the controller, the command API on port
// 9999 (ironic-python-agent's) and the commands behind it. Hardware parts
// (inventory, network bring-up, image writer, disks) are plugged in through
// Deps so this package stays free of them.
//
// Wiring, in agent/cmd/kiln-agent:
//
//	deps := agent.Deps{Log: log, Ring: ring, Safety: agent.SafetyFor(cfg)}
//	deps.NetworkUp = func(ctx context.Context) error { … netconf.Bringup … netconf.WaitReachable … }
//	deps.Inventory = func(ctx context.Context) (any, error) { return inventory.Collect(ctx, opts) }
//	hw := hwmgr.New(hwmgr.Options{Log: log})
//	deps.WriteImage = hw.WriteImage // write_image, standby.prepare_image
//	deps.Steps = hw.Steps()         // erase_devices*, inject_files: steps.Def values
//	a, err := agent.New(ctx, cfg, deps)
//	err = a.Run(ctx)
//
// A part left nil makes its commands FAIL with an error wrapping
// ErrNotAvailable ("not available in this agent build"), never a fake success.
// Setting WriteImage also offers the deploy step write_image.
//
// Steps are declared one way: a steps.Def (kind, name, interface, priority,
// argsinfo, reboot_requested, abortable, timeout, function). Deps.Steps go
// on the generic manager; steps.Register'ed managers, Deps.Managers and the
// executable plugins are steps.Managers built from Defs too, so
// get_X_steps reports exactly what execute_X_step runs.
//
// Time goes through Deps.Clock so tests drive the lookup backoff and the
// heartbeat cadence with a fake clock. A finished asynchronous command triggers
// a heartbeat at once (IPA waits at least 5 s), so the controller sees the
// result without delay.
package agent
