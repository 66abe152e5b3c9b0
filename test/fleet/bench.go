package fleet

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for the database size
)

// BenchConfig describes one benchmark run.
type BenchConfig struct {
	// N machines.
	N int
	// KilnBin is the kiln binary.
	KilnBin string
	// Dir holds the run's database (SQLite), boot files and controller logs.
	Dir string
	// Postgres, if set, is a postgres:// DSN whose search_path names an
	// empty schema (PostgresSchema) the controllers share; else SQLite.
	Postgres, PostgresSchema string
	// Controllers is how many `kiln serve` run (default 1; several need
	// Postgres). Behind a round-robin proxy when more than one.
	Controllers int
	// KillOne kills the second controller with SIGKILL once a tenth of the
	// nodes are active in the deploy phase (the rest on their way).
	KillOne bool
	// HeartbeatInterval of the agents (see Config; default 20 s).
	HeartbeatInterval time.Duration
	// Clients is how many API requests the operator's tooling sends at
	// once (default 16).
	Clients int
	// PhaseTimeout bounds each phase (default 30 min): nodes not done by
	// then are reported stuck.
	PhaseTimeout time.Duration
	// StallTimeout ends a phase early when no node reached its target or
	// failed for this long (default 3 min): the nodes still waiting are
	// reported stuck and the run goes on with the others.
	StallTimeout time.Duration
	// KilnArgs are extra `kiln serve` flags.
	KilnArgs []string
	// Log receives progress lines (default discard).
	Log io.Writer
	// afterRun, when set, sees the fleet once the last phase is over
	// (tests check the machines' side).
	afterRun func(*Fleet)
}

// Phase is one step of the run.
type Phase struct {
	Name string
	// Target is the state every node should reach.
	Target string
	Wall   time.Duration
	// Reached, Failed, Stuck, Lost count the nodes that entered the phase:
	// in the target state; in a failed state; neither by the deadline; no
	// longer listed.
	Reached, Failed, Stuck, Lost int
	// Errors are some failed nodes' last_error.
	Errors []string
	// Latency is heartbeat-to-next-command during the phase;
	// ByCommand the same per command that ended the wait.
	Latency   Summary
	ByCommand map[string]Summary
	// Waits are the conductors' own measures of the phase (waits.go).
	Waits Waits
	// CPU is the CPU time the controllers used during the phase (those
	// alive at its end): on a shared machine, where the wall time
	// mostly measures the load, what the phase cost them.
	CPU time.Duration
}

// Result is what a run measured.
type Result struct {
	N           int
	Database    string // "sqlite" or "postgres"
	Controllers int
	Phases      []Phase
	// Total is enroll → last node active.
	Total time.Duration
	// Active is how many nodes ended active.
	Active int
	// Latency over every phase.
	Latency Summary
	// PeakRSS of each controller (VmHWM), by name.
	PeakRSS map[string]int64
	// DBBytes is the database's size on disk at the end (SQLite: the file
	// and its WAL; PostgreSQL: the schema's tables with indexes and TOAST);
	// WALBytes is the SQLite WAL's share, which a checkpoint gives back.
	DBBytes, WALBytes int64
	// Killed names the controller killed, and when.
	Killed, KilledAt string
	Fleet            Counters
	// Interrupted: the run was stopped before the end; the last phase
	// listed is partial.
	Interrupted bool
}

type benchRun struct {
	cfg   BenchConfig
	hc    *http.Client
	api   string
	fleet *Fleet
	ctls  []*controller
	log   func(format string, args ...any)
}

// RunBench enrolls N simulated machines in real controllers and takes them
// enroll → manage → inspect → provide (automated clean) → deploy → active
// through the API, measuring each phase.
func RunBench(ctx context.Context, cfg BenchConfig) (res *Result, err error) {
	if cfg.Controllers <= 0 {
		cfg.Controllers = 1
	}
	if cfg.Controllers > 1 && cfg.Postgres == "" {
		return nil, errors.New("fleet bench: several controllers need PostgreSQL")
	}
	if cfg.KillOne && cfg.Controllers < 2 {
		return nil, errors.New("fleet bench: killing one controller needs at least two")
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 16
	}
	if cfg.PhaseTimeout <= 0 {
		cfg.PhaseTimeout = 30 * time.Minute
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 3 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	r := &benchRun{cfg: cfg,
		hc: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * cfg.Clients}},
		log: func(format string, args ...any) {
			fmt.Fprintf(cfg.Log, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
		}}
	res = &Result{N: cfg.N, Database: "sqlite", Controllers: cfg.Controllers, PeakRSS: map[string]int64{}}
	if cfg.Postgres != "" {
		res.Database = "postgres"
	}

	bootDir := filepath.Join(cfg.Dir, "boot")
	if err := os.MkdirAll(bootDir, 0o755); err != nil {
		return nil, err
	}
	// The fleet's machines never load these; iPXE scripts only name them.
	for _, f := range []string{"kiln-agent.kernel", "kiln-agent.initramfs"} {
		if err := os.WriteFile(filepath.Join(bootDir, f), []byte("simulated\n"), 0o644); err != nil {
			return nil, err
		}
	}
	db := filepath.Join(cfg.Dir, "kiln.db")
	if cfg.Postgres != "" {
		db = cfg.Postgres
	}
	addrs := make([]string, cfg.Controllers)
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return nil, err
		}
	}
	r.api = "http://" + addrs[0]
	var px *proxy
	if cfg.Controllers > 1 {
		if px, err = startProxy(addrs); err != nil {
			return nil, err
		}
		defer px.close()
		r.api = "http://" + px.addr()
	}
	args := []string{"--log-level", "warn", "--boot-dir", bootDir, "--api-url", r.api}
	if cfg.Controllers > 1 {
		// Fail over within seconds rather than the default 30.
		args = append(args, "--conductor-heartbeat-interval", "2s", "--conductor-dead-after", "10s")
	}
	args = append(args, cfg.KilnArgs...)
	defer func() {
		// Controllers first: they log out of the fleet's BMCs as they stop.
		for _, c := range r.ctls {
			c.stop()
			res.PeakRSS[c.name] = c.peak
		}
		if r.fleet != nil {
			_ = r.fleet.Close()
		}
	}()
	for i, a := range addrs {
		c, err := startController(cfg.KilnBin, cfg.Dir, fmt.Sprintf("fleet-c%d", i+1), a, db, args)
		if err != nil {
			return nil, err
		}
		r.ctls = append(r.ctls, c)
	}
	r.fleet, err = Start(Config{N: cfg.N, BootURL: r.api + "/boot/boot.ipxe", HeartbeatInterval: cfg.HeartbeatInterval})
	if err != nil {
		return nil, err
	}
	r.log("%d machines, %d controller(s) on %s, API %s, logs in %s", cfg.N, cfg.Controllers, res.Database, r.api, cfg.Dir)

	start := time.Now()
	nodes, ph := r.enroll(ctx)
	res.Phases = append(res.Phases, ph)
	steps := []struct {
		name, verb, target string
		prep               func(uuid string) error
	}{
		{"manage", "manage", "manageable", nil},
		{"inspect", "inspect", "manageable", nil},
		{"provide", "provide", "available", nil},
		{"deploy", "active", "active", r.setImage},
	}
	for _, s := range steps {
		if ctx.Err() != nil {
			break // interrupted: report what was measured
		}
		var ph Phase
		nodes, ph = r.phase(ctx, s.name, s.verb, s.target, nodes, s.prep, res)
		res.Phases = append(res.Phases, ph)
	}
	res.Total = time.Since(start)
	if last := res.Phases[len(res.Phases)-1]; last.Name == "deploy" && ctx.Err() == nil {
		res.Active = len(nodes)
	}
	if cfg.afterRun != nil {
		cfg.afterRun(r.fleet)
	}
	res.Latency = r.fleet.Latencies().All()
	res.Fleet = r.fleet.Counters()
	for _, c := range r.ctls {
		res.PeakRSS[c.name] = c.peakRSS()
	}
	res.DBBytes, res.WALBytes, err = r.dbSize(db)
	if ctx.Err() != nil {
		res.Interrupted = true
		return res, ctx.Err()
	}
	return res, err
}

// call sends one API request, retrying what a busy or failing-over
// controller answers (transport errors, 409 NodeLocked, 503).
func (r *benchRun) call(ctx context.Context, method, path string, body any, want int) (map[string]any, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	var last error
	retried := false
	for try := 0; try < 60; try++ {
		if try > 0 {
			retried = true
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(min(try, 10)) * 200 * time.Millisecond):
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, r.api+path, bytes.NewReader(payload))
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
		req.Header.Set("Content-Type", "application/json")
		resp, err := r.hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		switch {
		case resp.StatusCode == want:
			return out, nil
		case resp.StatusCode == http.StatusConflict || resp.StatusCode >= 500:
			last = fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
		case retried && resp.StatusCode == http.StatusBadRequest && method == http.MethodPut:
			// The try the connection dropped had been carried out.
			return out, nil
		default:
			return out, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
		}
	}
	return nil, last
}

// parallel runs f for every index, Clients at a time, and returns the
// indexes for which it succeeded.
func (r *benchRun) parallel(n int, f func(i int) error) (ok []int, errs []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.cfg.Clients)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := f(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				ok = append(ok, i)
			}
		}()
	}
	wg.Wait()
	slices.Sort(ok)
	return ok, errs
}

// enroll creates a redfish node (iPXE boot, agent inspection, direct
// deploy) and its port for every machine.
func (r *benchRun) enroll(ctx context.Context) ([]string, Phase) {
	r.fleet.Latencies().SetPhase("enroll")
	r.log("enroll: %d nodes", r.cfg.N)
	start, cpu0 := time.Now(), r.cpu()
	uuids := make([]string, r.cfg.N)
	ok, errs := r.parallel(r.cfg.N, func(i int) error {
		m := r.fleet.Machine(i)
		n, err := r.call(ctx, http.MethodPost, "/v1/nodes", map[string]any{
			"name": fmt.Sprintf("fleet-%05d", i), "driver": "redfish",
			"boot_interface": "ipxe", "inspect_interface": "agent", "deploy_interface": "direct",
			"driver_info": map[string]any{"redfish_address": m.BMCURL, "redfish_system_id": m.SystemID,
				"redfish_username": BMCUsername, "redfish_password": BMCPassword},
		}, http.StatusCreated)
		if err != nil {
			return err
		}
		uuid, _ := n["uuid"].(string)
		if _, err := r.call(ctx, http.MethodPost, "/v1/ports", map[string]any{"node_uuid": uuid, "address": m.MAC, "pxe_enabled": true}, http.StatusCreated); err != nil {
			return err
		}
		uuids[i] = uuid
		return nil
	})
	ph := Phase{Name: "enroll", Target: "enroll", Wall: time.Since(start), Reached: len(ok), Failed: len(errs), CPU: r.cpu() - cpu0}
	for _, e := range errs[:min(len(errs), 3)] {
		ph.Errors = append(ph.Errors, e.Error())
	}
	var out []string
	for _, i := range ok {
		out = append(out, uuids[i])
	}
	r.log("enroll: %d nodes in %s (%d failed)", len(out), ph.Wall.Round(time.Millisecond), len(errs))
	return out, ph
}

func (r *benchRun) setImage(uuid string) error {
	_, err := r.call(context.Background(), http.MethodPatch, "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": "http://images.example/fleet.qcow2"},
		{"op": "add", "path": "/instance_info/image_checksum", "value": strings.Repeat("ab", 32)},
		{"op": "add", "path": "/instance_info/image_disk_format", "value": "qcow2"},
	}, http.StatusOK)
	return err
}

// phase asks every node for verb and waits until each is in target (or
// failed, or the phase times out); it returns the nodes that got there.
func (r *benchRun) phase(ctx context.Context, name, verb, target string, uuids []string, prep func(string) error, res *Result) ([]string, Phase) {
	r.fleet.Latencies().SetPhase(name)
	r.log("%s: %d nodes → %s", name, len(uuids), target)
	start, cpu0, waits0 := time.Now(), r.cpu(), r.snapshots()
	ph := Phase{Name: name, Target: target}
	// At 10,000 nodes asking takes minutes, and nodes deploy meanwhile: the
	// controller is killed once a tenth are active even if the asking is
	// not over, so that it dies in the middle of the phase.
	stopKiller := func() {}
	if r.cfg.KillOne && res.Killed == "" && name == "deploy" {
		stopKiller = r.killWhenActive(ctx, start, len(uuids), res)
	}
	asked, errs := r.parallel(len(uuids), func(i int) error {
		if prep != nil {
			if err := prep(uuids[i]); err != nil {
				return err
			}
		}
		_, err := r.call(ctx, http.MethodPut, "/v1/nodes/"+uuids[i]+"/states/provision", map[string]any{"target": verb}, http.StatusAccepted)
		return err
	})
	stopKiller()
	for _, e := range errs[:min(len(errs), 3)] {
		ph.Errors = append(ph.Errors, e.Error())
	}
	ph.Failed = len(errs)
	waiting := map[string]bool{}
	for _, i := range asked {
		waiting[uuids[i]] = true
	}
	var reached []string
	last := map[string]map[string]any{} // each waiting node as last listed
	deadline := start.Add(r.cfg.PhaseTimeout)
	poll := time.Second
	if len(uuids) > 2000 {
		poll = 3 * time.Second
	}
	lastReport := time.Now()
	lastProgress, lastDone := time.Now(), 0
	for len(waiting) > 0 {
		all, err := r.listNodes(ctx)
		if err != nil {
			r.log("%s: list nodes: %v", name, err)
		}
		seen := map[string]bool{}
		for _, n := range all {
			u, _ := n["uuid"].(string)
			seen[u] = true
			if !waiting[u] {
				continue
			}
			last[u] = n
			st, _ := n["provision_state"].(string)
			switch {
			case st == target && n["target_provision_state"] == nil && n["reservation"] == nil &&
				(name != "inspect" || n["inspection_finished_at"] != nil):
				delete(waiting, u)
				reached = append(reached, u)
			case strings.HasSuffix(st, "failed") || st == "error":
				if n["reservation"] == nil {
					delete(waiting, u)
					ph.Failed++
					if len(ph.Errors) < 5 {
						ph.Errors = append(ph.Errors, fmt.Sprintf("%s %s: %v", u, st, n["last_error"]))
					}
				}
			}
		}
		if err == nil {
			for u := range waiting {
				if !seen[u] {
					delete(waiting, u)
					ph.Lost++
				}
			}
		}
		killing := r.cfg.KillOne && res.Killed == "" && name == "deploy"
		if killing && len(reached) >= max(1, len(uuids)/10) {
			c := r.ctls[1]
			c.kill()
			res.Killed = c.name
			res.KilledAt = fmt.Sprintf("deploy, %d of %d nodes active, %s into the phase", len(reached), len(uuids), time.Since(start).Round(time.Second))
			r.log("%s: killed %s with SIGKILL (%s)", name, c.name, res.KilledAt)
		}
		if len(waiting) == 0 || ctx.Err() != nil {
			break
		}
		if done := len(reached) + ph.Failed + ph.Lost; done != lastDone {
			lastDone, lastProgress = done, time.Now()
		}
		if time.Now().After(deadline) || time.Since(lastProgress) > r.cfg.StallTimeout {
			ph.Stuck = len(waiting)
			for u := range waiting {
				if len(ph.Errors) < 8 {
					n := last[u]
					ph.Errors = append(ph.Errors, fmt.Sprintf("%s stuck in %v (target %v, reservation %v, last_error %v)",
						u, n["provision_state"], n["target_provision_state"], n["reservation"], n["last_error"]))
				}
			}
			break
		}
		if time.Since(lastReport) >= 30*time.Second {
			r.log("%s: %d %s, %d failed, %d waiting (%s)", name, len(reached), target, ph.Failed, len(waiting), time.Since(start).Round(time.Second))
			lastReport = time.Now()
		}
		wait := poll
		if killing {
			wait = 250 * time.Millisecond // catch the moment to kill
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	ph.Wall = time.Since(start)
	ph.CPU = max(r.cpu()-cpu0, 0) // a controller killed during the phase takes its share along
	ph.Reached = len(reached)
	ph.Latency = r.fleet.Latencies().Phase(name)
	ph.ByCommand = r.fleet.Latencies().ByCommand(name)
	ph.Waits = phaseWaits(waits0, r.snapshots())
	r.log("%s: %d %s, %d failed, %d stuck, %d lost in %s", name, ph.Reached, target, ph.Failed, ph.Stuck, ph.Lost, ph.Wall.Round(time.Millisecond))
	return reached, ph
}

// cpu is the CPU time the running controllers have used so far.
func (r *benchRun) cpu() time.Duration {
	var t time.Duration
	for _, c := range r.ctls {
		t += c.cpu()
	}
	return t
}

// listNodes pages through every node with the fields the phases watch.
// killWhenActive kills the second controller, from a goroutine, once a
// tenth of n nodes are active, and records it in res; the function it
// returns stops the goroutine and waits for it (res is then safe to read).
func (r *benchRun) killWhenActive(ctx context.Context, start time.Time, n int, res *Result) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if active, err := r.countActive(ctx, max(1, n/10)); err == nil && active >= max(1, n/10) {
				c := r.ctls[1]
				c.kill()
				res.Killed = c.name
				res.KilledAt = fmt.Sprintf("deploy, %d of %d nodes active while the nodes were still being asked, %s into the phase",
					active, n, time.Since(start).Round(time.Second))
				r.log("deploy: killed %s with SIGKILL (%s)", c.name, res.KilledAt)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// countActive counts active nodes, up to at least limit.
func (r *benchRun) countActive(ctx context.Context, limit int) (int, error) {
	count := 0
	err := r.pageNodes(ctx, "provision_state=active&fields=uuid", func(page []any) bool {
		count += len(page)
		return count < limit
	})
	return count, err
}

func (r *benchRun) listNodes(ctx context.Context) ([]map[string]any, error) {
	var all []map[string]any
	err := r.pageNodes(ctx, "fields=uuid,provision_state,target_provision_state,reservation,last_error,inspection_finished_at", func(page []any) bool {
		for _, x := range page {
			if m, ok := x.(map[string]any); ok {
				all = append(all, m)
			}
		}
		return true
	})
	return all, err
}

// pageNodes lists nodes matching query a thousand at a time, handing each
// page to more until it returns false or the list ends.
func (r *benchRun) pageNodes(ctx context.Context, query string, more func(page []any) bool) error {
	marker := ""
	for {
		path := "/v1/nodes?limit=1000&" + query
		if marker != "" {
			path += "&marker=" + marker
		}
		out, err := r.call(ctx, http.MethodGet, path, nil, http.StatusOK)
		if err != nil {
			return err
		}
		raw, _ := out["nodes"].([]any)
		if !more(raw) || len(raw) < 1000 {
			return nil
		}
		marker, _ = raw[len(raw)-1].(map[string]any)["uuid"].(string)
	}
}

func (r *benchRun) dbSize(db string) (total, wal int64, err error) {
	if r.cfg.Postgres == "" {
		if st, err := os.Stat(db); err == nil {
			total = st.Size()
		}
		if st, err := os.Stat(db + "-wal"); err == nil {
			wal = st.Size()
		}
		return total + wal, wal, nil
	}
	conn, err := sql.Open("pgx", r.cfg.Postgres)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	var n sql.NullInt64
	err = conn.QueryRow(`SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
		JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = $1 AND c.relkind = 'r'`, r.cfg.PostgresSchema).Scan(&n)
	return n.Int64, 0, err
}

// Print writes the result as the table `make bench-fleet` shows.
func (res *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "fleet: %d machines, %d controller(s), %s\n", res.N, res.Controllers, res.Database)
	fmt.Fprintf(w, "%-8s %10s %8s %7s %6s %5s %10s %10s %8s %9s\n", "phase", "wall", "reached", "failed", "stuck", "lost", "hb→cmd p50", "p99", "samples", "kiln CPU")
	for _, p := range res.Phases {
		fmt.Fprintf(w, "%-8s %10s %8d %7d %6d %5d %10s %10s %8d %9s\n", p.Name, p.Wall.Round(time.Millisecond), p.Reached, p.Failed, p.Stuck, p.Lost,
			ms(p.Latency.P50), ms(p.Latency.P99), p.Latency.Count, p.CPU.Round(10*time.Millisecond))
	}
	if res.Interrupted {
		fmt.Fprintf(w, "interrupted %s after the start, during %s (its line is partial)\n", res.Total.Round(time.Millisecond), res.Phases[len(res.Phases)-1].Name)
	} else {
		fmt.Fprintf(w, "enroll → active: %s, %d of %d nodes active\n", res.Total.Round(time.Millisecond), res.Active, res.N)
	}
	fmt.Fprintf(w, "heartbeat → next command: p50 %s, p99 %s, max %s (%d samples)\n", ms(res.Latency.P50), ms(res.Latency.P99), ms(res.Latency.Max), res.Latency.Count)
	for _, p := range res.Phases {
		if len(p.ByCommand) == 0 {
			continue
		}
		fmt.Fprintf(w, "%-8s by command (p50/p99, count):", p.Name)
		for _, cmd := range slices.Sorted(maps.Keys(p.ByCommand)) {
			c := p.ByCommand[cmd]
			fmt.Fprintf(w, " %s %s/%s (%d);", cmd, ms(c.P50), ms(c.P99), c.Count)
		}
		fmt.Fprintln(w)
	}
	names := make([]string, 0, len(res.PeakRSS))
	for n := range res.PeakRSS {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "peak RSS %s: %.1f MiB\n", n, float64(res.PeakRSS[n])/(1<<20))
	}
	if res.WALBytes > 0 {
		fmt.Fprintf(w, "database size: %.1f MiB (of which WAL %.1f MiB)\n", float64(res.DBBytes)/(1<<20), float64(res.WALBytes)/(1<<20))
	} else {
		fmt.Fprintf(w, "database size: %.1f MiB\n", float64(res.DBBytes)/(1<<20))
	}
	res.printWaits(w)
	if res.Killed != "" {
		fmt.Fprintf(w, "killed %s with SIGKILL during %s\n", res.Killed, res.KilledAt)
	}
	fmt.Fprintf(w, "machines: %d power-ons, %d agents booted, %d local boots, %d boot errors\n",
		res.Fleet.PowerOns, res.Fleet.Agents, res.Fleet.LocalBoots, res.Fleet.BootErrors)
	for _, p := range res.Phases {
		for _, e := range p.Errors {
			fmt.Fprintf(w, "%s: %s\n", p.Name, e)
		}
	}
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
