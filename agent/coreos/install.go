package coreos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"time"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/disk/hints"
	"github.com/kilnhq/kiln/agent/image"
	"github.com/kilnhq/kiln/agent/netconf"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

// The manager's and the step's names, as metal3's ironic-agent-image has
// them, so hardware_manager_version and deploy_steps look the same to a
// controller whichever agent runs.
const (
	ManagerName    = "CoreOSInstallHardwareManager"
	ManagerVersion = "1"
	StepName       = "install_coreos"
)

// DefaultNetworkConfigDir is where the ramdisk's NetworkManager keyfiles
// live (and where netconf.WriteKeyfiles puts the ones it generates); it is
// what coreos-installer --copy-network copies by default.
const DefaultNetworkConfigDir = netconf.KeyfileDir

// Manager is the CoreOS hardware manager. The zero value is not usable; New
// returns the one registered at init with the defaults.
type Manager struct {
	// NetworkConfigDir is copied when coreos_copy_network is set.
	NetworkConfigDir string
	// FirstbootKargs, when set, replace CoreOS's default first-boot network
	// arguments (coreos-installer --firstboot-args). Metal3 sends none.
	FirstbootKargs string
	// LookPath finds coreos-installer; a failure selects the native path.
	LookPath func(file string) (string, error)
	// Devices lists the disks the root device is chosen from.
	Devices func(safety steps.Safety) ([]disk.Device, error)
	// HTTPClient fetches the image (nil: agent/image's default client).
	HTTPClient *http.Client
	// AllowMD5 accepts md5 image checksums.
	AllowMD5 bool
	// Tries and RetryDelay bound coreos-installer runs (3 tries, as Metal3).
	Tries      int
	RetryDelay time.Duration
}

func init() {
	steps.Register(steps.MustManager(ManagerName, ManagerVersion, steps.SupportServiceProvider, New().Steps()...))
}

// New returns a Manager with the ramdisk defaults.
func New() *Manager {
	return &Manager{
		NetworkConfigDir: DefaultNetworkConfigDir,
		LookPath:         exec.LookPath,
		Devices: func(s steps.Safety) ([]disk.Device, error) {
			// Loop devices only when allowlisted (development, tests).
			return disk.Enumerate("", disk.EnumerateOptions{AllowLoop: s.Allow})
		},
		Tries:      3,
		RetryDelay: 5 * time.Second,
	}
}

// Steps offers install_coreos as a deploy step of priority 0 (the controller
// requests it explicitly, at 80 in Metal3's deploy_steps). The manager is
// registered at a service-provider support level, like metal3's: the step is
// only run when a controller asks for it.
func (m *Manager) Steps() []steps.Def {
	return []steps.Def{{Kind: proto.StepDeploy, Run: m.Execute,
		Step: proto.Step{Step: StepName, Priority: 0, Interface: "deploy", ArgsInfo: map[string]proto.ArgInfo{}}}}
}

// Execute runs install_coreos.
func (m *Manager) Execute(ctx context.Context, call steps.Call) (any, error) {
	if call.Log == nil {
		call.Log = slog.Default()
	}
	res, err := m.Install(ctx, call)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Result is what install_coreos reports.
type Result struct {
	Device string `json:"device"`
	// Method is "native" or "coreos-installer".
	Method string `json:"method"`
}

// Install is the step: parse the node, validate the Ignition config, pick
// the root device, then install with coreos-installer when it is in PATH or
// natively otherwise.
func (m *Manager) Install(ctx context.Context, call steps.Call) (Result, error) {
	log := call.Log
	opts, err := ParseOptions(call.Node, m.AllowMD5)
	if err != nil {
		return Result{}, fmt.Errorf("install CoreOS: %w", err)
	}
	if opts.Ignition != nil {
		warnings, err := ValidateIgnition(opts.Ignition)
		for _, w := range warnings {
			log.Warn("Ignition config", "warning", w)
		}
		if err != nil {
			return Result{}, fmt.Errorf("install CoreOS: %w", err)
		}
	}
	devs, err := m.Devices(call.Safety)
	if err != nil {
		return Result{}, fmt.Errorf("install CoreOS: list disks: %w", err)
	}
	root, err := hints.SelectRoot(devs, opts.Hints, opts.Skip)
	if err != nil {
		return Result{}, fmt.Errorf("install CoreOS: %w", err)
	}
	if err := call.Safety.Check(root.Name); err != nil {
		return Result{}, fmt.Errorf("install CoreOS: %w", err)
	}
	log.Info("installing CoreOS", "device", root.Name, "image", opts.ImageURL,
		"ignition", opts.Ignition != nil, "append_kargs", opts.AppendKargs, "copy_network", opts.CopyNetwork)
	if path, err := m.LookPath("coreos-installer"); err == nil {
		if err := m.runInstaller(ctx, log, path, root.Name, opts); err != nil {
			return Result{}, err
		}
		if err := disk.RereadPartitions(ctx, root.Name); err != nil {
			log.Warn("re-read partitions after coreos-installer", "device", root.Name, "err", err)
		}
		return Result{Device: root.Name, Method: "coreos-installer"}, nil
	}
	if err := m.installNative(ctx, call, root.Name, opts); err != nil {
		return Result{}, err
	}
	return Result{Device: root.Name, Method: "native"}, nil
}

// installNative streams the metal image and customises its boot partition.
func (m *Manager) installNative(ctx context.Context, call steps.Call, dev string, opts Options) error {
	log := call.Log
	if opts.ImageURL == "" {
		return errors.New("install CoreOS: instance_info.image_source is empty and there is no coreos-installer for an offline install")
	}
	if !opts.HasChecksum {
		return fmt.Errorf("install CoreOS: no checksum for %s (instance_info.image_checksum or image_os_hash_algo/value)", opts.ImageURL)
	}
	if err := ensureExclusive(dev); err != nil {
		return fmt.Errorf("install CoreOS: %w", err)
	}
	call.Report(proto.CommandProgress{Stage: "write_image"})
	res, err := image.Write(ctx, image.Request{
		URL: opts.ImageURL, Checksum: opts.Checksum, AllowMD5: m.AllowMD5, Target: dev,
		HTTPClient: m.HTTPClient,
		Progress: func(done, total int64) {
			if total < 0 {
				total = 0
			}
			call.Report(proto.CommandProgress{BytesDone: done, BytesTotal: total, Stage: "write_image"})
		},
	})
	if err != nil {
		return fmt.Errorf("install CoreOS: %w", err)
	}
	log.Info("CoreOS image written", "device", dev, "format", res.Format, "size", res.Size,
		"checksum", res.Checksum.String(), "duration", res.Duration)

	if moved, err := disk.FixBackupGPT(ctx, call.Safety, dev); err != nil {
		log.Warn("backup GPT not moved to the end of the disk; CoreOS fixes it on first boot", "device", dev, "err", err)
	} else if moved {
		log.Info("backup GPT moved to the end of the disk", "device", dev)
	}

	call.Report(proto.CommandProgress{Stage: "customize_boot"})
	err = withBootMounted(ctx, dev, func(root string) error {
		if opts.Ignition != nil {
			if err := WriteIgnition(root, opts.Ignition); err != nil {
				return err
			}
			log.Info("Ignition config written", "path", IgnitionPath, "bytes", len(opts.Ignition))
		}
		if err := WriteFirstboot(root, m.FirstbootKargs); err != nil {
			return err
		}
		if err := AppendKargs(root, opts.AppendKargs); err != nil {
			return err
		}
		if opts.CopyNetwork {
			n, err := CopyNetwork(root, m.NetworkConfigDir)
			if err != nil {
				return err
			}
			log.Info("network configuration copied for first boot", "from", m.NetworkConfigDir, "files", n)
		}
		return nil
	})
	if err != nil {
		// Like coreos-installer --preserve-on-error (what Metal3 passes):
		// the disk stays as it is for debugging; cleaning erases it.
		return fmt.Errorf("install CoreOS: customize boot partition of %s: %w", dev, err)
	}
	return nil
}
