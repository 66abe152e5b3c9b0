package fleet

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/pgtest"
)

var kilnBin string

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin, pgtest.Stop) }

func TestParseScript(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		agent  bool
		want   kernelArgs
	}{
		{"local disk", "#!ipxe\n# kiln: local disk for 52:54:00:00:00:01\necho Kiln: booting from local disk\nexit\n", false, kernelArgs{}},
		{"deploy", "#!ipxe\n:retry\nkernel --name kernel http://c/boot/files/k initrd=ramdisk ipa-api-url=http://c:6385 BOOTIF=01-52-54-00-00-00-01 console=ttyS0 || goto fail\ninitrd --name ramdisk http://c/r || goto fail\n",
			true, kernelArgs{apiURL: "http://c:6385"}},
		{"inspect with token", "#!ipxe\nkernel k ipa-api-url=http://c ipa-agent-token=tok ipa-inspection-callback-url=http://c/v1/continue_inspection\n",
			true, kernelArgs{apiURL: "http://c", token: "tok", inspectURL: "http://c/v1/continue_inspection"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, agent := parseScript(tc.script)
			if agent != tc.agent || got != tc.want {
				t.Errorf("parseScript = %+v, %v; want %+v, %v", got, agent, tc.want, tc.agent)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{"none", nil, Summary{}},
		{"one", ms(7), Summary{Count: 1, P50: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond}},
		{"two", ms(9, 1), Summary{Count: 2, P50: time.Millisecond, P99: 9 * time.Millisecond, Max: 9 * time.Millisecond}},
		{"hundred", ms(hundred...), Summary{Count: 100, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summarize(tc.in); got != tc.want {
				t.Errorf("summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestAddrsAreDistinct(t *testing.T) {
	seen := map[string]int{}
	for i := range MaxMachines {
		a := Addr(i)
		if j, ok := seen[a]; ok {
			t.Fatalf("machines %d and %d share %s", j, i, a)
		}
		if strings.HasSuffix(a, ".0") || strings.HasSuffix(a, ".255") {
			t.Fatalf("machine %d: %s", i, a)
		}
		seen[a] = i
	}
}

// checkRun asserts that every machine went enroll → active with nothing
// failed, stuck or lost, through the protocols the fleet models.
func checkRun(t *testing.T, res *Result, n int) {
	t.Helper()
	var b strings.Builder
	res.Print(&b)
	t.Logf("\n%s", b.String())
	want := []string{"enroll", "manage", "inspect", "provide", "deploy"}
	if len(res.Phases) != len(want) {
		t.Fatalf("phases %d, want %v", len(res.Phases), want)
	}
	for i, p := range res.Phases {
		if p.Name != want[i] || p.Reached != n || p.Failed != 0 || p.Stuck != 0 || p.Lost != 0 {
			t.Errorf("phase %s: reached %d failed %d stuck %d lost %d, want %s with all %d reached (%v)",
				p.Name, p.Reached, p.Failed, p.Stuck, p.Lost, want[i], n, p.Errors)
		}
	}
	if res.Active != n {
		t.Errorf("%d of %d active", res.Active, n)
	}
	// The agent ran for inspection, cleaning and deployment; every command
	// the controller sent followed a heartbeat of that agent.
	for _, name := range []string{"provide", "deploy"} {
		p := res.Phases[slicesIndex(want, name)]
		if p.Latency.Count < n {
			t.Errorf("%s: %d heartbeat→command samples for %d nodes", name, p.Latency.Count, n)
		}
		// Each sample is counted once more under its command: in this
		// phase the agent runs steps of its kind, each a real command.
		sum := 0
		for cmd, c := range p.ByCommand {
			sum += c.Count
			if cmd == "?" || c.P50 > c.P99 {
				t.Errorf("%s: command %q: %+v", name, cmd, c)
			}
		}
		kind := map[string]string{"provide": "clean.", "deploy": "deploy."}[name]
		if sum != p.Latency.Count || !slices.ContainsFunc(slices.Collect(maps.Keys(p.ByCommand)), func(c string) bool { return strings.HasPrefix(c, kind) }) {
			t.Errorf("%s: by command %v, %d samples in all", name, p.ByCommand, p.Latency.Count)
		}
	}
	if res.Latency.P99 <= 0 || res.Latency.P50 > res.Latency.P99 {
		t.Errorf("latency %+v", res.Latency)
	}
	if res.Fleet.Agents != int64(3*n) || res.Fleet.BootErrors != 0 {
		t.Errorf("fleet %+v, want %d agents (inspect, clean, deploy) and no boot error", res.Fleet, 3*n)
	}
	if res.DBBytes <= 0 {
		t.Errorf("database size %d", res.DBBytes)
	}
	// Deploying keeps the controller busy for some scheduler ticks
	// (CPU time is counted in 10 ms units).
	if p := res.Phases[slicesIndex(want, "deploy")]; p.CPU <= 0 {
		t.Errorf("deploy: controller CPU %v", p.CPU)
	}
	for name, rss := range res.PeakRSS {
		if rss <= 1<<20 {
			t.Errorf("peak RSS of %s: %d bytes", name, rss)
		}
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestFleetSQLite is `make bench-fleet` at N=20: one controller on SQLite.
// Each machine ends powered on, booted from its disk with a persistent
// disk override, after three network boots into the agent.
func TestFleetSQLite(t *testing.T) {
	const n = 20
	var fl *Fleet
	res, err := runBench(t, BenchConfig{N: n, KilnBin: kilnBin, Dir: t.TempDir(), HeartbeatInterval: 2 * time.Second,
		PhaseTimeout: 3 * time.Minute}, func(f *Fleet) {
		fl = f
		for i := range n {
			boots := f.Boots(i)
			pxe := 0
			for _, b := range boots {
				if b.Target == bmcsim.TargetPxe {
					pxe++
				}
			}
			if last := boots[len(boots)-1]; pxe != 3 || last.Target != bmcsim.TargetHdd || f.PowerState(i) != bmcsim.PowerOn {
				t.Errorf("machine %d: %d network boots, last boot %+v, power %s; want 3, Hdd, On", i, pxe, last, f.PowerState(i))
			}
			if bo, _ := f.machines[i].BootOverride(context.Background()); bo.Target != bmcsim.TargetHdd || bo.Enabled != bmcsim.OverrideContinuous {
				t.Errorf("machine %d: boot override %+v, want Hdd Continuous", i, bo)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if fl == nil {
		t.Fatal("the fleet was not checked")
	}
	checkRun(t, res, n)
	if res.Database != "sqlite" || len(res.PeakRSS) != 1 {
		t.Errorf("database %s, controllers %v", res.Database, res.PeakRSS)
	}
}

// TestFleetPostgresKill is `make bench-fleet DB=postgres` at N=20: three
// controllers, the second killed with SIGKILL once a tenth of the nodes are
// active in the deploy phase. No node may be lost or stuck; the survivors take over.
func TestFleetPostgresKill(t *testing.T) {
	base, skip, err := pgtest.Server()
	if err != nil {
		t.Fatal(err)
	}
	if base == "" {
		t.Skipf("no PostgreSQL: %s", skip)
	}
	dsn, schema, drop, err := pgtest.NewSchema(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	const n = 20
	res, err := runBench(t, BenchConfig{N: n, KilnBin: kilnBin, Dir: t.TempDir(), Postgres: dsn, PostgresSchema: schema,
		Controllers: 3, KillOne: true, HeartbeatInterval: 2 * time.Second, PhaseTimeout: 3 * time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Killed != "fleet-c2" {
		t.Fatalf("killed %q, want fleet-c2", res.Killed)
	}
	deploy := res.Phases[len(res.Phases)-1]
	// A node whose deploy step the dead controller was carrying out may
	// fail with a last_error naming the crash; none may be lost or stuck.
	for _, p := range res.Phases {
		if p.Stuck != 0 || p.Lost != 0 {
			t.Errorf("phase %s: %d stuck, %d lost (%v)", p.Name, p.Stuck, p.Lost, p.Errors)
		}
	}
	if deploy.Reached+deploy.Failed != n {
		t.Errorf("deploy: %d active + %d failed of %d", deploy.Reached, deploy.Failed, n)
	}
	for _, e := range deploy.Errors {
		if strings.HasSuffix(e, "<nil>") {
			t.Errorf("failed without last_error: %s", e)
		}
	}
	if len(res.PeakRSS) != 3 || res.DBBytes <= 0 || res.Latency.Count == 0 {
		t.Errorf("RSS %v, database %d bytes, latency %+v", res.PeakRSS, res.DBBytes, res.Latency)
	}
	var b strings.Builder
	res.Print(&b)
	t.Logf("\n%s", b.String())
}

// runBench runs RunBench; check (if not nil) sees the fleet before it is
// closed.
func runBench(t *testing.T, cfg BenchConfig, check func(*Fleet)) (*Result, error) {
	t.Helper()
	cfg.Log = testWriter{t}
	cfg.afterRun = check
	return RunBench(context.Background(), cfg)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
