package hwmgr

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/erase"
	"github.com/kilnhq/kiln/agent/raid"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

// Options tune a Manager. The zero value works on a real machine.
type Options struct {
	// SysRoot is where sysfs is mounted ("" = /sys).
	SysRoot string
	// Devices, when set, replaces disk.Enumerate (tests).
	Devices func() ([]disk.Device, error)
	// HTTPClient fetches config drives and inject_files content given as
	// URLs; nil means a client with a 5-minute timeout.
	HTTPClient *http.Client
	// ImageRetries and ImageRetryDelay tune image downloads (0: image's
	// defaults, IPA's 9 retries).
	ImageRetries    int
	ImageRetryDelay time.Duration
	// Log receives what the steps do; nil means slog.Default().
	Log *slog.Logger
	// EFIVarsDir is where install_bootloader writes EFI variables ("" =
	// SysRoot's firmware/efi/efivars); tests give a plain directory.
	EFIVarsDir string
	// RunInRoot, when set, replaces running a command chrooted into the
	// image (install_bootloader's grub-install) (tests).
	RunInRoot func(ctx context.Context, root string, env, argv []string) ([]byte, error)
	// RAID mirrors the image's ESP onto the members of a software RAID
	// root device (nil: agent/raid's default).
	RAID *raid.Manager
}

// Manager holds the generic hardware manager's steps.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	written writtenImage // the last image written, for install_bootloader
}

// writtenImage is where the last image went and what kind it was.
type writtenImage struct {
	Device    string
	Partition bool // a partition image (its own root partition, no boot loader)
}

// New returns a Manager.
func New(opts Options) *Manager {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.RAID == nil {
		opts.RAID = raid.New(raid.Options{SysRoot: opts.SysRoot, Log: opts.Log})
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 5 * time.Minute}
	}
	return &Manager{opts: opts, log: opts.Log}
}

// Step names and priorities, as IPA's GenericHardwareManager has them.
const (
	StepEraseMetadata = "erase_devices_metadata"
	StepErase         = "erase_devices"
	StepEraseExpress  = "erase_devices_express"
	StepInjectFiles   = "inject_files"
)

// Steps are the generic manager's disk steps (the runtime's Deps.Steps).
func (m *Manager) Steps() []steps.Def {
	return []steps.Def{
		{Kind: proto.StepClean, Step: proto.Step{Step: StepEraseMetadata, Priority: 99, Interface: "deploy", Abortable: true},
			Run: m.eraseStep(StepEraseMetadata)},
		{Kind: proto.StepClean, Step: proto.Step{Step: StepErase, Priority: 10, Interface: "deploy", Abortable: true},
			Run: m.eraseStep(StepErase)},
		{Kind: proto.StepClean, Step: proto.Step{Step: StepEraseExpress, Priority: 0, Interface: "deploy", Abortable: true},
			Run: m.eraseStep(StepEraseExpress)},
		{Kind: proto.StepDeploy, Step: proto.Step{Step: StepEraseMetadata, Priority: 0, Interface: "deploy"},
			Run: m.eraseStep(StepEraseMetadata)},
		{Kind: proto.StepDeploy, Step: proto.Step{Step: StepInjectFiles, Priority: 0, Interface: "deploy",
			ArgsInfo: map[string]proto.ArgInfo{"files": {Description: "files to inject: a list of {path, partition, " +
				"content (base64 or an http(s) URL), deleted, mode, dirmode, owner, group}; merged after " +
				"node.properties.inject_files", Required: false}}},
			Run: m.injectFilesStep},
	}
}

// EraseResult is one device's line in an erase step's result.
type EraseResult struct {
	Device  string `json:"device"`
	Method  string `json:"method"`
	Reason  string `json:"reason,omitempty"`
	Checked int64  `json:"checked_bytes"`
}

// eraseStep erases every disk the step may touch (IPA erases all block
// devices but those in skip_block_devices), one after the other.
func (m *Manager) eraseStep(name string) steps.Func {
	return func(ctx context.Context, call steps.Call) (any, error) {
		return m.Erase(ctx, name, call.Node, call.Safety, call.Report)
	}
}

// Erase runs erase step name (erase_devices, erase_devices_express or
// erase_devices_metadata) over the disks.
func (m *Manager) Erase(ctx context.Context, name string, node steps.Node, s steps.Safety, report func(proto.CommandProgress)) ([]EraseResult, error) {
	if !s.InRamdisk && len(s.Allow) == 0 {
		return nil, fmt.Errorf("refusing to run %s: the agent is not running in a ramdisk and no device was given with --allow-device", name)
	}
	devs, err := m.candidates(s, SkipDevices(node))
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("%s: no disk to erase (allowed outside a ramdisk: %v)", name, s.Allow)
	}
	e := &erase.Eraser{Guard: s, Log: m.log}
	out := []EraseResult{}
	var total int64
	for _, d := range devs {
		total += d.Size
	}
	var done int64
	for _, d := range devs {
		if err := s.Check(d.Name); err != nil {
			return out, err
		}
		if report != nil {
			report(proto.CommandProgress{BytesDone: done, BytesTotal: total, Stage: name + " " + d.Name})
		}
		var r erase.Result
		switch name {
		case StepErase:
			r, err = e.Full(ctx, d.Name)
		case StepEraseExpress:
			r, err = e.Express(ctx, d.Name)
		default:
			r, err = e.Metadata(ctx, d.Name)
		}
		if err != nil {
			return out, fmt.Errorf("%s of %s: %w", name, d.Name, err)
		}
		m.log.Info("device erased", "step", name, "device", d.Name, "method", r.Method, "reason", r.Reason)
		out = append(out, EraseResult{Device: d.Name, Method: string(r.Method), Reason: r.Reason, Checked: r.Checked})
		done += d.Size
	}
	return out, nil
}
