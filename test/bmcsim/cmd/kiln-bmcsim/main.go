// Command kiln-bmcsim runs simulated Redfish BMCs for demos and manual tests:
// N memory-backed BMCs (one 127.0.0.1 port each) or N QEMU VMs with a BMC
// each, plus a JSON admin API to inject faults and read request counts.
//
//	kiln-bmcsim -n 20 -personality idrac -admin 127.0.0.1:8099
//	kiln-bmcsim -backend qemu -n 2 -qemu-dir /tmp/vms -bootfile http://10.0.2.2:6385/ipxe
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/test/bmcsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-bmcsim:", err)
		os.Exit(1)
	}
}

type options struct {
	n                 int
	personality       string
	host              string
	basePort          int
	user, pass        string
	admin             string
	backend           string
	qemuDir, disk     string
	diskSize          int64
	bootFile, tftpDir string
	uefi              bool
	memMiB, cpus      int
	agentFwd          int
	verbose, tls      bool
	disks             int
	taskDuration      time.Duration
}

// run starts the lab, prints one JSON line per BMC to out, and serves until
// ctx ends. If ready is not nil it receives the lab once it is up (for tests).
func run(ctx context.Context, args []string, out io.Writer, ready chan<- *bmcsim.Lab) error {
	var o options
	fs := flag.NewFlagSet("kiln-bmcsim", flag.ContinueOnError)
	fs.IntVar(&o.n, "n", 1, "number of BMCs")
	fs.StringVar(&o.personality, "personality", "generic", "BMC personality: generic, idrac, ilo, supermicro")
	fs.StringVar(&o.host, "host", "127.0.0.1", "address the BMCs listen on")
	fs.IntVar(&o.basePort, "base-port", 0, "BMC i listens on base-port+i (0: random free ports)")
	fs.StringVar(&o.user, "user", bmcsim.DefaultUsername, "BMC user name")
	fs.StringVar(&o.pass, "password", bmcsim.DefaultPassword, "BMC password")
	fs.StringVar(&o.admin, "admin", "127.0.0.1:8099", "admin API listen address (empty: none)")
	fs.StringVar(&o.backend, "backend", "memory", "backend: memory or qemu")
	fs.StringVar(&o.qemuDir, "qemu-dir", "", "qemu: directory for the VMs' state (vm<i>/ inside)")
	fs.StringVar(&o.disk, "disk", "", "qemu: disk image for every VM (default: a sparse raw disk per VM)")
	fs.Int64Var(&o.diskSize, "disk-size", 2<<30, "qemu: size in bytes of the per-VM raw disk when -disk is empty")
	fs.StringVar(&o.bootFile, "bootfile", "", "qemu: slirp bootfile (TFTP name or http:// URL of an iPXE script)")
	fs.StringVar(&o.tftpDir, "tftp", "", "qemu: slirp TFTP root")
	fs.BoolVar(&o.uefi, "uefi", false, "qemu: boot OVMF instead of SeaBIOS")
	fs.IntVar(&o.memMiB, "mem", 1024, "qemu: guest memory in MiB")
	fs.IntVar(&o.cpus, "cpus", 2, "qemu: guest CPUs")
	fs.IntVar(&o.agentFwd, "agent-fwd-base", 0, "qemu: forward 127.0.0.1:<agent-fwd-base+i> to port 9999 (the agent's API) of VM i (0: none)")
	fs.IntVar(&o.disks, "disks", 1, "memory: disks per system (2 or more for RAID volumes)")
	fs.DurationVar(&o.taskDuration, "task-duration", bmcsim.DefaultTaskDuration, "how long Redfish tasks (volumes, firmware updates) run")
	fs.BoolVar(&o.verbose, "v", false, "log every request")
	fs.BoolVar(&o.tls, "tls", false, "serve HTTPS with a self-signed certificate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	newBackend, err := o.backendFactory(logger)
	if err != nil {
		return err
	}
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: o.n, Personality: o.personality, Username: o.user,
		Password: o.pass, NewBackend: newBackend, Host: o.host, BasePort: o.basePort, TLS: o.tls, Logger: logger,
		Disks: o.disks, TaskDuration: o.taskDuration})
	if err != nil {
		return err
	}
	defer lab.Close() // also powers the VMs off

	enc := json.NewEncoder(out)
	for i, b := range lab.BMCs {
		u, p := b.Credentials()
		if err := enc.Encode(map[string]any{"index": i, "url": b.URL, "username": u, "password": p,
			"personality": o.personality, "systems": b.SystemIDs()}); err != nil {
			return fmt.Errorf("write BMC list: %w", err)
		}
	}
	errc := make(chan error, 1)
	if o.admin != "" {
		ln, err := net.Listen("tcp", o.admin)
		if err != nil {
			return fmt.Errorf("listen for admin API on %s: %w", o.admin, err)
		}
		srv := &http.Server{Handler: lab.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
		defer srv.Close()
		go func() { errc <- srv.Serve(ln) }()
		logger.Info("admin API", "url", "http://"+ln.Addr().String()+"/bmcs")
	}
	logger.Info("BMCs running", "count", len(lab.BMCs), "personality", o.personality, "backend", o.backend)
	if ready != nil {
		ready <- lab
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("admin API: %w", err)
	}
}

func (o options) backendFactory(logger *slog.Logger) (func(int) (bmcsim.Backend, error), error) {
	switch o.backend {
	case "memory":
		return nil, nil // the lab's default
	case "qemu":
		if o.qemuDir == "" {
			return nil, errors.New("-backend qemu needs -qemu-dir")
		}
		return func(i int) (bmcsim.Backend, error) {
			dir := filepath.Join(o.qemuDir, "vm"+strconv.Itoa(i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("create %s: %w", dir, err)
			}
			disk := o.disk
			if disk == "" {
				disk = filepath.Join(dir, "disk.raw")
				if _, err := os.Stat(disk); errors.Is(err, os.ErrNotExist) {
					f, err := os.Create(disk)
					if err != nil {
						return nil, fmt.Errorf("create disk: %w", err)
					}
					if err := errors.Join(f.Truncate(o.diskSize), f.Close()); err != nil {
						return nil, fmt.Errorf("size disk %s: %w", disk, err)
					}
				}
			}
			var fwd []string
			if o.agentFwd > 0 {
				fwd = []string{"tcp:127.0.0.1:" + strconv.Itoa(o.agentFwd+i) + "-:9999"}
			}
			q, err := bmcsim.NewQEMU(bmcsim.QEMUConfig{Dir: dir, Disk: disk, MAC: bmcsim.MACForIndex(i), HostFwd: fwd,
				BootFile: o.bootFile, TFTPDir: o.tftpDir, UEFI: o.uefi, MemoryMiB: o.memMiB, CPUs: o.cpus, Logger: logger})
			if err != nil {
				return nil, err // not a typed nil inside the interface
			}
			return q, nil
		}, nil
	}
	return nil, fmt.Errorf("unknown backend %q (memory or qemu)", o.backend)
}
