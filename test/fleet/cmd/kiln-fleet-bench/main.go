// Command kiln-fleet-bench takes N simulated machines (test/fleet: Redfish
// BMCs and ramdisk agents at the real protocols) from enroll to active
// through real `kiln serve` controllers and prints what each phase took:
//
//	go run ./test/fleet/cmd/kiln-fleet-bench -n 1000                  # SQLite, one controller
//	go run ./test/fleet/cmd/kiln-fleet-bench -n 300 -db postgres -kill # PostgreSQL, three controllers, one killed
//
// `make bench-fleet N=… DB=sqlite|postgres` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/test/fleet"
	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/pgtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-fleet-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("n", 100, "machines")
	db := flag.String("db", "sqlite", "database: sqlite (one controller) or postgres (KILN_TEST_POSTGRES_DSN, or a throwaway cluster when root with Debian's postgresql)")
	controllers := flag.Int("controllers", 0, "controllers (default 1 on sqlite, 3 on postgres)")
	kill := flag.Bool("kill", false, "kill -9 the second controller once a tenth of the nodes are active in the deploy phase (needs two or more)")
	kiln := flag.String("kiln", "", "kiln binary (default: built from this tree)")
	dir := flag.String("dir", "", "directory for the database, boot files and controller logs (default: a new temp dir, kept)")
	hb := flag.Duration("heartbeat", 20*time.Second, "agents' periodic heartbeat interval (each picks 1–1.5×)")
	clients := flag.Int("clients", 16, "API requests in flight at once")
	timeout := flag.Duration("phase-timeout", 30*time.Minute, "longest a phase may take; nodes not done by then are stuck")
	stall := flag.Duration("stall-timeout", 3*time.Minute, "end a phase when no node got anywhere for this long; the ones waiting are stuck")
	extra := flag.String("kiln-args", "", "extra kiln serve flags, space separated")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the benchmark itself (the simulated fleet) to this file")
	flag.Parse()

	if *cpuProfile != "" {
		// The fleet shares the machine with the controllers: what it
		// costs is CPU they do not get.
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	if *dir == "" {
		d, err := os.MkdirTemp("", "kiln-fleet-")
		if err != nil {
			return err
		}
		*dir = d
	}
	if *kiln == "" {
		bin, cleanup, err := kilnproc.Build()
		if err != nil {
			return err
		}
		defer cleanup()
		*kiln = bin
	}
	cfg := fleet.BenchConfig{N: *n, KilnBin: *kiln, Dir: *dir, Controllers: *controllers, KillOne: *kill,
		HeartbeatInterval: *hb, Clients: *clients, PhaseTimeout: *timeout, StallTimeout: *stall, Log: os.Stderr, KilnArgs: strings.Fields(*extra)}
	switch *db {
	case "sqlite":
	case "postgres":
		base, skip, err := pgtest.Server()
		if err != nil {
			return err
		}
		defer pgtest.Stop()
		if base == "" {
			return fmt.Errorf("no PostgreSQL: %s", skip)
		}
		dsn, schema, drop, err := pgtest.NewSchema(base)
		if err != nil {
			return err
		}
		defer drop()
		cfg.Postgres, cfg.PostgresSchema = dsn, schema
		if cfg.Controllers == 0 {
			cfg.Controllers = 3
		}
	default:
		return fmt.Errorf("-db %q: want sqlite or postgres", *db)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := fleet.RunBench(ctx, cfg)
	if res != nil {
		res.Print(os.Stdout)
	}
	fmt.Fprintf(os.Stderr, "logs: %s\n", filepath.Clean(*dir))
	return err
}
