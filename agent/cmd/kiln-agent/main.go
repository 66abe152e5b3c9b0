// Command kiln-agent is the ramdisk agent: it speaks the ironic-python-agent
// protocol to a Kiln or Ironic controller. In the initramfs it runs as the init
// payload and never exits; outside one (development) it behaves like any
// program and refuses destructive work on devices not named with --allow-device.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/kilnhq/kiln/agent"
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
		"api_url", cfg.APIURL, "bootif", cfg.BootIF)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent.HandlePowerSignals(ctx, log, safety.InRamdisk, cancel)

	deps := agent.Deps{Log: log, Ring: ring, Safety: safety}
	// Hardware parts (inventory, network, image writer, disks) are wired here
	// as their packages land: deps.Inventory, deps.NetworkUp, deps.WriteImage, …
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
