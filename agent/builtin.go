package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
	"golang.org/x/sys/unix"
)

func syncCmd(fn func(ctx context.Context, params json.RawMessage) (any, error)) cmdSpec {
	return cmdSpec{prepare: func(p json.RawMessage) (runFunc, error) {
		return func(ctx context.Context, _ func(proto.CommandProgress)) (any, error) { return fn(ctx, p) }, nil
	}}
}

func notAvailable(what string) error {
	return fmt.Errorf("%s: %w", what, ErrNotAvailable)
}

// builtinCommands is IPA's extension table.
func (a *Agent) builtinCommands() map[string]map[string]cmdSpec {
	exts := map[string]map[string]cmdSpec{
		"standby": {
			"prepare_image":       {async: true, prepare: a.prepareImage},
			"run_image":           {async: true, prepare: a.powerCmd(Reboot)},
			"power_off":           {async: true, prepare: a.powerCmd(PowerOff)},
			"sync":                syncCmd(func(context.Context, json.RawMessage) (any, error) { unix.Sync(); return nil, nil }),
			"get_partition_uuids": syncCmd(a.getPartitionUUIDs),
		},
		"image": {
			"install_bootloader": {async: true, prepare: a.installBootloader},
		},
		"log": {
			"collect_system_logs": syncCmd(func(context.Context, json.RawMessage) (any, error) {
				b, err := a.CollectLogs()
				if err != nil {
					return nil, err
				}
				return proto.SystemLogsResult{SystemLogs: base64.StdEncoding.EncodeToString(b)}, nil
			}),
		},
		"system": {
			"lockdown": syncCmd(func(context.Context, json.RawMessage) (any, error) { a.lockDown(); return nil, nil }),
		},
		"poll": {
			"get_hardware_info": syncCmd(func(ctx context.Context, _ json.RawMessage) (any, error) {
				if a.deps.Inventory == nil {
					return nil, notAvailable("hardware inventory")
				}
				return a.deps.Inventory(ctx)
			}),
		},
		"rescue": {
			"finalize_rescue": {prepare: func(p json.RawMessage) (runFunc, error) {
				var fp proto.FinalizeRescueParams
				if err := decodeParams(p, &fp); err != nil {
					return nil, err
				}
				return func(ctx context.Context, _ func(proto.CommandProgress)) (any, error) {
					if a.deps.FinalizeRescue == nil {
						return nil, notAvailable("rescue")
					}
					return nil, a.deps.FinalizeRescue(ctx, fp)
				}, nil
			}},
		},
	}
	for _, k := range []proto.StepKind{proto.StepClean, proto.StepDeploy, proto.StepService} {
		exts[string(k)] = map[string]cmdSpec{
			"get_" + string(k) + "_steps":    a.getStepsCmd(k),
			"execute_" + string(k) + "_step": {async: true, prepare: a.executeStepCmd(k)},
		}
	}
	return exts
}

func (a *Agent) getStepsCmd(kind proto.StepKind) cmdSpec {
	return cmdSpec{prepare: func(p json.RawMessage) (runFunc, error) {
		var gp proto.GetStepsParams
		if err := decodeParams(p, &gp); err != nil {
			return nil, err
		}
		return func(context.Context, func(proto.CommandProgress)) (any, error) {
			return a.set.Collect(kind), nil
		}, nil
	}}
}

func (a *Agent) executeStepCmd(kind proto.StepKind) func(json.RawMessage) (runFunc, error) {
	return func(p json.RawMessage) (runFunc, error) {
		var ep proto.ExecuteStepParams
		if err := ep.UnmarshalFor(kind, p); err != nil {
			return nil, invalidParams(err)
		}
		return func(ctx context.Context, progress func(proto.CommandProgress)) (any, error) {
			call := steps.Call{Kind: kind, Step: ep.Step, Node: ep.Node, Ports: ep.Ports, Safety: a.safety,
				Log: a.log.With("step", ep.Step.Step.Step, "kind", string(kind)), Progress: progress}
			res, err := a.set.Execute(ctx, call, ep.Version)
			if err != nil {
				return nil, err
			}
			return proto.ExecuteStepResult{Kind: kind, Result: res, Step: ep.Step}, nil
		}, nil
	}
}

func (a *Agent) prepareImage(p json.RawMessage) (runFunc, error) {
	var pp proto.PrepareImageParams
	if err := decodeParams(p, &pp); err != nil {
		return nil, err
	}
	if pp.ImageInfo.ID == "" || len(pp.ImageInfo.URLs) == 0 {
		return nil, invalidParams(fmt.Errorf("image_info needs id and urls"))
	}
	return func(ctx context.Context, progress func(proto.CommandProgress)) (any, error) {
		res, err := a.writeImage(ctx, pp.ImageInfo, pp.Configdrive, a.nodeDict(), progress)
		if err != nil {
			return nil, err
		}
		return fmt.Sprintf("image (%s) written to device %s", pp.ImageInfo.ID, res.Device), nil
	}, nil
}

func (a *Agent) writeImage(ctx context.Context, info proto.ImageInfo, cd json.RawMessage, node steps.Node, progress func(proto.CommandProgress)) (steps.ImageResult, error) {
	if a.deps.WriteImage == nil {
		return steps.ImageResult{}, notAvailable("image writing")
	}
	a.mu.Lock()
	lc := a.lookupCfg
	a.mu.Unlock()
	res, err := a.deps.WriteImage(ctx, steps.ImageRequest{Info: info, Configdrive: cd, Node: node, Safety: a.safety,
		Progress: progress, Log: a.log.With("image", info.ID), Lookup: lc})
	if err != nil {
		return steps.ImageResult{}, fmt.Errorf("write image %s: %w", info.ID, err)
	}
	a.mu.Lock()
	u := res.PartitionUUIDs
	a.partUUIDs = &u
	a.mu.Unlock()
	return res, nil
}

// writeImageStep is the deploy step write_image (args image_info, configdrive).
func (a *Agent) writeImageStep(ctx context.Context, call steps.Call) (any, error) {
	pp, err := call.Step.ImageArgs()
	if err != nil {
		return nil, invalidParams(err)
	}
	if pp.ImageInfo.ID == "" || len(pp.ImageInfo.URLs) == 0 {
		return nil, invalidParams(fmt.Errorf("write_image args: image_info needs id and urls"))
	}
	res, err := a.writeImage(ctx, pp.ImageInfo, pp.Configdrive, call.Node, call.Progress)
	if err != nil {
		return nil, err
	}
	return map[string]any{"device": res.Device}, nil
}

func (a *Agent) nodeDict() steps.Node {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.node == nil {
		return steps.Node{}
	}
	return steps.Node{"uuid": a.node.UUID, "properties": a.node.Properties,
		"instance_info": a.node.InstanceInfo, "driver_internal_info": a.node.DriverInternalInfo}
}

func (a *Agent) getPartitionUUIDs(ctx context.Context, _ json.RawMessage) (any, error) {
	if a.deps.PartitionUUIDs != nil {
		return a.deps.PartitionUUIDs(ctx)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.partUUIDs != nil {
		return *a.partUUIDs, nil
	}
	if a.deps.WriteImage == nil {
		return nil, notAvailable("partition UUIDs (no image writer)")
	}
	return proto.PartitionUUIDs{}, nil
}

func (a *Agent) installBootloader(p json.RawMessage) (runFunc, error) {
	var bp proto.InstallBootloaderParams
	if err := decodeParams(p, &bp); err != nil {
		return nil, err
	}
	return func(ctx context.Context, _ func(proto.CommandProgress)) (any, error) {
		if a.deps.InstallBootloader == nil {
			return nil, notAvailable("bootloader installation")
		}
		return nil, a.deps.InstallBootloader(ctx, bp, a.safety)
	}, nil
}

func (a *Agent) powerCmd(action PowerAction) func(json.RawMessage) (runFunc, error) {
	return func(json.RawMessage) (runFunc, error) {
		return func(ctx context.Context, _ func(proto.CommandProgress)) (any, error) {
			if a.deps.Power != nil {
				return nil, a.deps.Power(ctx, action)
			}
			return nil, a.defaultPower(action)
		}, nil
	}
}

// defaultPower syncs and reboots or powers off, only inside a ramdisk.
func (a *Agent) defaultPower(action PowerAction) error {
	if !a.safety.InRamdisk {
		return fmt.Errorf("refusing to %s: the agent is not running in a ramdisk", action)
	}
	a.log.Warn("power action requested", "action", action)
	unix.Sync()
	time.Sleep(time.Second) // let the command result and heartbeat out
	cmd := unix.LINUX_REBOOT_CMD_RESTART
	if action == PowerOff {
		cmd = unix.LINUX_REBOOT_CMD_POWER_OFF
	}
	if err := unix.Reboot(cmd); err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	return nil
}

// lockDown is system.lockdown: stop heartbeating and serving the API (the
// reply to this command still goes out).
func (a *Agent) lockDown() {
	a.mu.Lock()
	if a.lockedDown {
		a.mu.Unlock()
		return
	}
	a.lockedDown = true
	s := a.server
	a.mu.Unlock()
	close(a.lockdown)
	a.log.Warn("lockdown requested: stopping heartbeats and the command API")
	if s != nil {
		go func() {
			time.Sleep(500 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		}()
	}
}

// defaultLogFiles are copied into collect_system_logs when present.
var defaultLogFiles = []string{"/proc/cmdline", "/proc/meminfo", "/proc/mounts", "/proc/partitions",
	"/proc/cpuinfo", "/proc/net/dev", "/proc/modules", "/proc/interrupts"}

// CollectLogs is the tar.gz log.collect_system_logs returns: the agent log ring
// (agent.log), the kernel log (dmesg) and a few /proc files.
func (a *Agent) CollectLogs() ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	now := a.clock.Now()
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("tar %s: %w", name, err)
		}
		_, err := tw.Write(b)
		return err
	}
	if err := add("agent.log", a.ring.Bytes()); err != nil {
		return nil, err
	}
	if k, err := readKmsg(); err == nil {
		if err := add("dmesg", k); err != nil {
			return nil, err
		}
	} else {
		a.log.Debug("kernel log not collected", "err", err)
	}
	files := a.deps.LogFiles
	if files == nil {
		files = defaultLogFiles
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if err := add(path.Join("files", f), b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close tar: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("close gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// readKmsg reads the kernel ring buffer from /dev/kmsg without blocking.
func readKmsg() ([]byte, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/kmsg: %w", err)
	}
	defer unix.Close(fd)
	var out bytes.Buffer
	rec := make([]byte, 8192)
	for out.Len() < 4<<20 {
		n, err := unix.Read(fd, rec)
		if errors.Is(err, syscall.EAGAIN) {
			break
		}
		if errors.Is(err, syscall.EPIPE) { // overwritten record: skip it
			continue
		}
		if err != nil {
			return out.Bytes(), nil
		}
		if n <= 0 {
			break
		}
		out.Write(rec[:n])
	}
	return out.Bytes(), nil
}
