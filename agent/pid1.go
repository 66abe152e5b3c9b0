package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Supervise runs run over and over when inRamdisk: the agent is the machine's
// only payload, so a fatal error is logged and retried after a pause, never an
// exit (a dead PID 1 panics the kernel; a dead uinit leaves a dead box).
// Outside a ramdisk it returns run's error. A panic in run counts as an error.
// It returns when ctx ends; in a ramdisk the caller must then idle, not exit.
func Supervise(ctx context.Context, log *slog.Logger, inRamdisk bool, pause time.Duration, run func(ctx context.Context) error) error {
	for {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
				}
			}()
			return run(ctx)
		}()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !inRamdisk {
			return err
		}
		log.Error("agent stopped; restarting", "err", err, "in", pause)
		time.Sleep(pause)
	}
}

// HandlePowerSignals makes SIGTERM, SIGPWR and SIGINT shut the machine down
// cleanly (sync + power off) inside a ramdisk; outside one they cancel ctx.
// It also watches the ACPI power button input device when there is one.
func HandlePowerSignals(ctx context.Context, log *slog.Logger, inRamdisk bool, cancel context.CancelFunc) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGPWR, syscall.SIGINT)
	go func() {
		for s := range ch {
			if !inRamdisk {
				log.Info("signal received; stopping", "signal", s)
				cancel()
				return
			}
			log.Warn("signal received; powering off", "signal", s)
			poweroff(log)
		}
	}()
	if inRamdisk {
		go watchPowerButton(ctx, log)
	}
}

func poweroff(log *slog.Logger) {
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		log.Error("power off failed", "err", err)
	}
}

// Linux input events: EV_KEY / KEY_POWER.
const (
	evKey    = 1
	keyPower = 116
)

// watchPowerButton finds input devices named "Power Button" and powers off on
// a KEY_POWER press.
func watchPowerButton(ctx context.Context, log *slog.Logger) {
	names, _ := filepath.Glob("/sys/class/input/event*/device/name")
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil || !strings.Contains(strings.ToLower(string(b)), "power button") {
			continue
		}
		ev := filepath.Base(filepath.Dir(filepath.Dir(n)))
		f, err := os.Open("/dev/input/" + ev)
		if err != nil {
			log.Debug("cannot open power button device", "dev", ev, "err", err)
			continue
		}
		log.Info("watching the power button", "dev", "/dev/input/"+ev)
		go func() {
			defer f.Close()
			<-ctx.Done()
		}()
		go func() {
			buf := make([]byte, 24) // struct input_event on 64-bit: timeval(16) type(2) code(2) value(4)
			for {
				if _, err := f.Read(buf); err != nil {
					return
				}
				typ := binary.LittleEndian.Uint16(buf[16:])
				code := binary.LittleEndian.Uint16(buf[18:])
				val := int32(binary.LittleEndian.Uint32(buf[20:]))
				if typ == evKey && code == keyPower && val == 1 {
					log.Warn("power button pressed; powering off")
					poweroff(log)
				}
			}
		}()
	}
}
