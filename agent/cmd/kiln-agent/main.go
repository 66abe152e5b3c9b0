// Command kiln-agent is the ramdisk agent: it speaks the ironic-python-agent
// protocol to a Kiln or Ironic controller. In the initramfs it runs as the init
// payload and never exits; outside one (development) it behaves like any
// program and refuses destructive work on devices not named with --allow-device.
//
// At start, inside the ramdisk, it loads the kernel modules the initramfs
// ships (initramfs/modload) in dependency order, then brings the network up
// (agent/netconf: BOOTIF first, DHCP or the kernel's ip=). Outside a ramdisk
// the network is left alone unless --network=true. The hardware parts wired
// into the runtime: inventory (agent/inventory), the image writer and the
// disk steps (agent/hwmgr), software RAID (agent/raid).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kilnhq/kiln/agent"
	_ "github.com/kilnhq/kiln/agent/coreos" // install_coreos deploy step (Metal3's CoreOS installs)
	"github.com/kilnhq/kiln/agent/efi"
	"github.com/kilnhq/kiln/agent/hwmgr"
	"github.com/kilnhq/kiln/agent/inventory"
	"github.com/kilnhq/kiln/agent/netconf"
	"github.com/kilnhq/kiln/agent/raid"
	"github.com/kilnhq/kiln/initramfs/modload"
	"github.com/kilnhq/kiln/proto"
)

func main() {
	ring := agent.NewRing(4 << 20)
	log := agent.NewLogger(os.Stderr, ring, slog.LevelInfo)
	slog.SetDefault(log)

	cfg, err := agent.LoadConfig(os.Args[1:], "/proc/cmdline", os.ReadFile, log)
	safety := agent.SafetyFor(cfg)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		log.Error("bad configuration", "err", err)
		if !safety.InRamdisk {
			os.Exit(2)
		}
		// In the ramdisk we cannot exit; keep the console readable and wait.
		select {}
	}
	log.Info("kiln-agent starting", "version", agent.Version, "in_ramdisk", safety.InRamdisk,
		"api_url", cfg.APIURL, "bootif", cfg.BootIF, "allow_devices", cfg.AllowDevices)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent.HandlePowerSignals(ctx, log, safety.InRamdisk, cancel)

	if safety.InRamdisk {
		loadModules(ctx, log)
		// install_bootloader writes UEFI boot entries through efivarfs,
		// a module the ramdisk's init could not mount before it loaded.
		if ok, err := efi.Mount(""); err != nil {
			log.Warn("UEFI variables unavailable", "err", err)
		} else if ok {
			log.Info("efivarfs mounted")
		}
	}

	sw := raid.New(raid.Options{Log: log})
	if safety.InRamdisk {
		// Arrays built by an earlier clean: the image goes to the array.
		sw.Assemble(ctx)
	}
	hw := hwmgr.New(hwmgr.Options{Log: log})
	deps := agent.Deps{Log: log, Ring: ring, Safety: safety,
		WriteImage: hw.WriteImage,
		Steps:      append(hw.Steps(), sw.Steps()...),
		Inventory: func(ctx context.Context) (any, error) {
			return inventory.Collect(ctx, inventory.Options{BootIF: cfg.BootIF, CollectLLDP: cfg.CollectLLDP, AllowLoop: safety.Allow, Logger: log})
		},
		ListenLLDP: func(ctx context.Context, ifaces []string) (map[string][]proto.LLDPTLV, error) {
			return inventory.ListenLLDP(ctx, ifaces, 30*time.Second) // IPA's lldp_timeout
		},
	}
	deps.InstallBootloader = hw.InstallBootloader
	if wantNetwork(cfg.Network, safety.InRamdisk) {
		deps.NetworkUp = networkUp(cfg, log)
	}
	err = agent.Supervise(ctx, log, safety.InRamdisk, 30*time.Second, func(ctx context.Context) error {
		a, err := agent.New(ctx, cfg, deps)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	})
	if safety.InRamdisk {
		log.Error("kiln-agent stopped inside the ramdisk; idling", "err", err)
		select {}
	}
	if err != nil && ctx.Err() == nil {
		log.Error("kiln-agent stopped", "err", err)
		os.Exit(1)
	}
}

// wantNetwork decides whether the agent configures the network: always in a
// ramdisk (nobody else will), on a workstation only when asked.
func wantNetwork(mode string, inRamdisk bool) bool {
	switch mode {
	case "true":
		return true
	case "false":
		return false
	}
	return inRamdisk
}

// loadModules inserts the initramfs's kernel modules, when it ships any.
func loadModules(ctx context.Context, log *slog.Logger) {
	if _, err := os.Stat(modload.Dir); errors.Is(err, os.ErrNotExist) {
		log.Info("no kernel modules to load", "dir", modload.Dir)
		return
	}
	start := time.Now()
	loaded, err := modload.Load(ctx, log, modload.Dir, nil)
	if err != nil {
		log.Warn("some kernel modules did not load", "err", err)
	}
	log.Info("kernel modules loaded", "count", len(loaded), "took", time.Since(start).Round(time.Millisecond))
}

// networkUp is Deps.NetworkUp: the first success brings the links up and
// gets an address (DHCP or ip=); every call then waits until the controller
// answers on TCP, so the lookup does not start into a dead network.
func networkUp(cfg agent.Config, log *slog.Logger) func(ctx context.Context) error {
	var mu sync.Mutex
	up := false
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if !up {
			// A host without DHCP carries NMState network data (kernel
			// argument, or appended to its ramdisk by the controller).
			cmdline, _ := os.ReadFile("/proc/cmdline")
			applied, err := netconf.ApplyNetworkData(ctx, netconf.NetworkDataOptions{Cmdline: string(cmdline), Logger: log})
			if err != nil {
				return fmt.Errorf("apply network data: %w", err)
			}
			if applied {
				up = true
				log.Info("network configured from NMState network data")
			}
		}
		if !up {
			res, err := netconf.Bringup(ctx, netconf.BringupOptions{BootIF: cfg.BootIF, IPArg: cfg.IPArg, Logger: log, DHCPv6Background: true})
			if err != nil {
				return err
			}
			up = true
			log.Info("network up", "interface", res.Interface, "links", res.Links, "leases", len(res.Leases))
		}
		url := cfg.APIURL
		if url == "" {
			url = cfg.InspectionCallbackURL
		}
		if url == "" {
			return nil
		}
		return netconf.WaitReachable(ctx, url, time.Minute)
	}
}
