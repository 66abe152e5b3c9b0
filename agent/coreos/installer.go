package coreos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"
)

// InstallerArgs are the coreos-installer arguments Metal3's hardware
// manager passes (without its chroot: Kiln's ramdisk runs the binary it
// finds in PATH). ignitionFile is "" when there is no config.
func InstallerArgs(dev, ignitionFile string, o Options) []string {
	args := []string{"install", "--preserve-on-error"}
	if ignitionFile != "" {
		args = append(args, "--ignition-file", ignitionFile)
	}
	if len(o.AppendKargs) > 0 {
		args = append(args, "--append-karg", strings.Join(o.AppendKargs, ","))
	}
	if o.ImageURL != "" {
		args = append(args, "--image-url", o.ImageURL, "--insecure")
	} else {
		args = append(args, "--offline")
	}
	if o.CopyNetwork {
		args = append(args, "--copy-network")
	}
	return append(args, dev)
}

// runInstaller runs coreos-installer up to m.Tries times, streaming its
// output to the step log line by line.
func (m *Manager) runInstaller(ctx context.Context, log *slog.Logger, path, dev string, o Options) error {
	ign := ""
	if o.Ignition != nil {
		f, err := os.CreateTemp("", "ironic-*.ign")
		if err != nil {
			return fmt.Errorf("install CoreOS: stage Ignition config: %w", err)
		}
		ign = f.Name()
		defer os.Remove(ign)
		_, err = f.Write(o.Ignition)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("install CoreOS: stage Ignition config: %w", err)
		}
	}
	args := InstallerArgs(dev, ign, o)
	tries := max(m.Tries, 1)
	var err error
	for try := 1; try <= tries; try++ {
		log.Info("running coreos-installer", "path", path, "args", args, "try", try)
		if err = runLogged(ctx, log, path, args); err == nil {
			return nil
		}
		log.Error("coreos-installer failed", "try", try, "err", err)
		if try < tries {
			select {
			case <-ctx.Done():
				return fmt.Errorf("install CoreOS: %w (after: %v)", ctx.Err(), err)
			case <-time.After(m.RetryDelay):
			}
		}
	}
	return fmt.Errorf("install CoreOS: %d tries: %w", tries, err)
}

// runLogged runs a command, logging each output line; the error names the
// exit status and the last line printed.
func runLogged(ctx context.Context, log *slog.Logger, path string, args []string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start coreos-installer: %w", err)
	}
	last := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		l := ""
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line != "" {
				l = line
				log.Info("coreos-installer: " + line)
			}
		}
		io.Copy(io.Discard, pr)
		last <- l
	}()
	err := cmd.Wait()
	pw.Close()
	l := <-last
	if err != nil {
		return fmt.Errorf("coreos-installer %s: %w: %s", strings.Join(args, " "), err, l)
	}
	return nil
}
