// Package cluster_test runs several `kiln serve` processes on one database and
// checks that they share the nodes, never act on one node together, and that
// killing one (or all, then restarting) loses nothing and leaves nothing stuck.
package cluster_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/pgtest"
)

var kilnBin string

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin, pgtest.Stop) }

// fast conductor timings so that failover happens within seconds.
var fast = []string{"--conductor-heartbeat-interval", "500ms", "--conductor-dead-after", "3s", "--log-level", "warn"}

func startN(t *testing.T, db string, n int) []*kilnproc.Proc {
	var procs []*kilnproc.Proc
	for i := range n {
		args := append([]string{"--conductor", fmt.Sprintf("c%d", i+1)}, fast...)
		procs = append(procs, kilnproc.Start(t, kilnBin, db, args...))
	}
	return procs
}

func call(t testing.TB, base, method, path string, body any) (int, map[string]any) {
	t.Helper()
	code, out, err := kilnproc.CallJSON(http.DefaultClient, base, method, path, body)
	if err != nil {
		return 0, map[string]any{"error": err.Error()}
	}
	return code, out
}

// provision retries while the node is locked, as Ironic clients do.
func provision(t testing.TB, base, uuid, verb string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out := call(t, base, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": verb})
		if code == 202 {
			return
		}
		if (code != 409 && code != 0) || time.Now().After(deadline) {
			t.Errorf("provision %s %s: %d %v", uuid, verb, code, out)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func enroll(t *testing.T, base string, n int, deployDelay string) []string {
	t.Helper()
	var uuids []string
	for i := range n {
		code, out := call(t, base, "POST", "/v1/nodes", map[string]any{
			"driver": "fake-hardware", "name": fmt.Sprintf("node-%03d", i),
			"driver_info": map[string]any{"fake_deploy_delay": deployDelay},
		})
		if code != 201 {
			t.Fatalf("create: %d %v", code, out)
		}
		uuids = append(uuids, out["uuid"].(string))
	}
	return uuids
}

// settle waits until every node is stable or failed and unreserved, asking
// any live controller; it returns the nodes by UUID.
func settle(t *testing.T, bases []string, uuids []string, timeout time.Duration) map[string]map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := map[string]map[string]any{}
		busy := 0
		for _, u := range uuids {
			var n map[string]any
			for _, b := range bases {
				if code, got := call(t, b, "GET", "/v1/nodes/"+u, nil); code == 200 {
					n = got
					break
				}
			}
			if n == nil {
				t.Fatalf("no controller answers for node %s", u)
			}
			out[u] = n
			st := proto.ProvisionState(fmt.Sprint(n["provision_state"]))
			if n["reservation"] != nil || !(state.IsStable(st) || state.IsFailed(st)) {
				busy++
			}
		}
		if busy == 0 {
			return out
		}
		if time.Now().After(deadline) {
			for u, n := range out {
				st := proto.ProvisionState(fmt.Sprint(n["provision_state"]))
				if n["reservation"] != nil || !(state.IsStable(st) || state.IsFailed(st)) {
					t.Errorf("node %s stuck: state %v reservation %v last_error %v", u, st, n["reservation"], n["last_error"])
				}
			}
			t.Fatalf("%d nodes not settled after %s", busy, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// toState drives all nodes through verb concurrently, via the controllers in turn.
func toState(t *testing.T, bases []string, uuids []string, verb string) {
	var wg sync.WaitGroup
	for i, u := range uuids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			provision(t, bases[i%len(bases)], u, verb)
		}()
	}
	wg.Wait()
}

// conductorsOf returns which conductors acted on the node, from its history.
func conductorsOf(t *testing.T, base, uuid string) map[string]int {
	_, h := call(t, base, "GET", "/v1/nodes/"+uuid+"/history?detail=true", nil)
	out := map[string]int{}
	events, _ := h["history"].([]any)
	for _, e := range events {
		ev := e.(map[string]any)
		if ev["event_type"] == "conductor" {
			out[fmt.Sprint(ev["conductor"])]++
		}
	}
	return out
}

// eachDatabase runs f on a fresh SQLite file and on PostgreSQL (skipped,
// saying why, when no PostgreSQL can be had).
func eachDatabase(t *testing.T, f func(t *testing.T, db string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, filepath.Join(t.TempDir(), "kiln.db")) })
	t.Run("postgres", func(t *testing.T) { f(t, pgtest.DSN(t)) })
}

func TestThreeControllersShareNodes(t *testing.T) { eachDatabase(t, threeControllersShareNodes) }

func threeControllersShareNodes(t *testing.T, db string) {
	procs := startN(t, db, 3)
	bases := []string{procs[0].URL, procs[1].URL, procs[2].URL}
	uuids := enroll(t, bases[0], 60, "0.05")
	// Let every controller see the others before work starts.
	time.Sleep(1500 * time.Millisecond)
	for _, verb := range []string{"manage", "provide", "active"} {
		toState(t, bases, uuids, verb)
		nodes := settle(t, bases, uuids, 60*time.Second)
		for u, n := range nodes {
			if st := n["provision_state"]; st == "enroll" || strings.Contains(fmt.Sprint(st), "failed") {
				t.Fatalf("node %s ended %v after %s: %v", u, st, verb, n["last_error"])
			}
		}
	}
	owners := map[string]int{}
	for _, u := range uuids {
		_, n := call(t, bases[0], "GET", "/v1/nodes/"+u, nil)
		if n["provision_state"] != "active" {
			t.Errorf("node %s is %v", u, n["provision_state"])
		}
		owners[fmt.Sprint(n["conductor"])]++
	}
	// Each node was acted on by one conductor only (its history names one), and
	// the three shared the work.
	for _, u := range uuids {
		var cs map[string]int
		cs = conductorsOf(t, bases[0], u)
		if len(cs) > 1 {
			t.Errorf("node %s was acted on by several conductors: %v", u, cs)
		}
	}
	if len(owners) != 3 {
		t.Errorf("nodes per conductor: %v; want all three to own some", owners)
	}
	t.Logf("nodes per conductor: %v", owners)
}

func TestKillOneControllerMidDeploy(t *testing.T) { eachDatabase(t, killOneControllerMidDeploy) }

func killOneControllerMidDeploy(t *testing.T, db string) {
	procs := startN(t, db, 3)
	bases := []string{procs[0].URL, procs[1].URL, procs[2].URL}
	uuids := enroll(t, bases[0], 50, "2")
	time.Sleep(1500 * time.Millisecond)
	toState(t, bases, uuids, "manage")
	settle(t, bases, uuids, 60*time.Second)
	toState(t, bases, uuids, "provide")
	settle(t, bases, uuids, 60*time.Second)

	toState(t, bases, uuids, "active")
	time.Sleep(700 * time.Millisecond)
	procs[1].Kill() // c2 dies holding reservations of nodes mid-deploy
	survivors := []string{bases[0], bases[2]}
	nodes := settle(t, survivors, uuids, 90*time.Second)
	active, failed := 0, 0
	for u, n := range nodes {
		st := proto.ProvisionState(fmt.Sprint(n["provision_state"]))
		switch {
		case st == proto.StateActive:
			active++
		case state.IsFailed(st):
			failed++
			if n["last_error"] == nil {
				t.Errorf("node %s failed without last_error", u)
			}
		default:
			t.Errorf("node %s ended in %s", u, st)
		}
		if n["conductor"] == "c2" {
			t.Logf("node %s still names dead conductor c2", u)
		}
	}
	t.Logf("after killing c2 mid-deploy: %d active, %d failed", active, failed)
	if active+failed != len(uuids) {
		t.Fatalf("%d of %d nodes accounted for", active+failed, len(uuids))
	}
}

func TestRestartMidDeploy(t *testing.T) {
	db := filepath.Join(t.TempDir(), "kiln.db")
	p := kilnproc.Start(t, kilnBin, db, append([]string{"--conductor", "solo"}, fast...)...)
	uuids := enroll(t, p.URL, 20, "3")
	toState(t, []string{p.URL}, uuids, "manage")
	settle(t, []string{p.URL}, uuids, 30*time.Second)
	toState(t, []string{p.URL}, uuids, "provide")
	settle(t, []string{p.URL}, uuids, 30*time.Second)
	toState(t, []string{p.URL}, uuids, "active")
	time.Sleep(time.Second)
	p.Kill()

	p2 := kilnproc.Start(t, kilnBin, db, append([]string{"--conductor", "solo"}, fast...)...)
	nodes := settle(t, []string{p2.URL}, uuids, 60*time.Second)
	for u, n := range nodes {
		st := proto.ProvisionState(fmt.Sprint(n["provision_state"]))
		if st != proto.StateActive && !(state.IsFailed(st) && n["last_error"] != nil) {
			t.Errorf("node %s after restart: %s (last_error %v)", u, st, n["last_error"])
		}
	}
	if len(nodes) != len(uuids) {
		t.Fatalf("lost nodes: %d of %d", len(nodes), len(uuids))
	}
}

// BenchmarkEnrollToActive1000 measures one controller taking 1,000
// fake-hardware nodes from enroll to active (manage, provide, deploy), and
// its peak RSS. Run: go test -run '^$' -bench EnrollToActive -benchtime 1x ./test/cluster/
func BenchmarkEnrollToActive1000(b *testing.B) {
	const nodes = 1000
	for range b.N {
		db := filepath.Join(b.TempDir(), "kiln.db")
		p := kilnproc.Start(b, kilnBin, db, "--conductor", "bench", "--log-level", "warn", "--workers", "64")
		t := b
		start := time.Now()
		uuids := make([]string, 0, nodes)
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range nodes {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				code, out := call(t, p.URL, "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "name": fmt.Sprintf("n%04d", i)})
				if code != 201 {
					b.Errorf("create: %d %v", code, out)
					return
				}
				mu.Lock()
				uuids = append(uuids, out["uuid"].(string))
				mu.Unlock()
			}()
		}
		wg.Wait()
		enrolled := time.Since(start)
		for _, verb := range []string{"manage", "provide", "active"} {
			phase := time.Now()
			var wg sync.WaitGroup
			for _, u := range uuids {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					provision(t, p.URL, u, verb)
				}()
			}
			wg.Wait()
			want := map[string]string{"manage": "manageable", "provide": "available", "active": "active"}[verb]
			for {
				code, out := call(t, p.URL, "GET", "/v1/nodes?provision_state="+want+"&limit=1000&fields=uuid", nil)
				if code == 200 && len(out["nodes"].([]any)) == nodes {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			b.Logf("%-8s %d nodes in %s", verb, nodes, time.Since(phase).Round(time.Millisecond))
		}
		total := time.Since(start)
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
		var hwm float64
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")), "%f", &hwm)
			}
		}
		b.ReportMetric(total.Seconds(), "s/1000-nodes")
		b.ReportMetric(enrolled.Seconds(), "s-enroll")
		b.ReportMetric(hwm/1024, "MiB-peak-RSS")
		p.Stop()
	}
}

// TestPeerWakesOwner: on PostgreSQL, a request recorded by one controller
// for a node another owns wakes the owner at once (LISTEN/NOTIFY). Both
// controllers scan once an hour, and the requests are sent only after each
// has done its scan of listening, so no scan can find them: every node
// owned by c2 moves only because c1 woke c2.
func TestPeerWakesOwner(t *testing.T) {
	db := pgtest.DSN(t)
	args := func(name string) []string {
		return []string{"--conductor", name, "--conductor-heartbeat-interval", "500ms", "--conductor-dead-after", "3s",
			"--conductor-scan-interval", "1h", "--power-sync-interval", "0", "--log-level", "info"}
	}
	c1 := kilnproc.Start(t, kilnBin, db, args("c1")...)
	c2 := kilnproc.Start(t, kilnBin, db, args("c2")...)
	uuids := enroll(t, c1.URL, 16, "0")

	// Wait (condition polling; the deadline is only a safety net) until
	// each ring holds both and each listens.
	deadline := time.Now().Add(60 * time.Second)
	for _, p := range []*kilnproc.Proc{c1, c2} {
		for {
			logs := p.Logs()
			if strings.Contains(logs, `members="[c1 c2]"`) && strings.Contains(logs, "listening for wake-ups from peer conductors") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: rings or listeners not ready after a minute", p.URL)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	toState(t, []string{c1.URL}, uuids, "manage")
	nodes := settle(t, []string{c1.URL}, uuids, 60*time.Second)
	byC2 := 0
	for _, u := range uuids {
		if st := nodes[u]["provision_state"]; st != "manageable" {
			t.Errorf("node %s is %v: %v", u, st, nodes[u]["last_error"])
		}
		// A manage records no history: the conductor's log names the
		// nodes it started a flow on.
		if strings.Contains(c2.Logs(), `msg="starting flow" conductor=c2 node=`+u) {
			byC2++
		}
	}
	// The ring gives c2 about half of the nodes; 16 nodes all on c1 would
	// prove nothing.
	if byC2 == 0 {
		t.Fatalf("c2 acted on none of %d nodes: the test did not exercise a wake-up", len(uuids))
	}
	t.Logf("c2 acted on %d of %d nodes, all requested through c1", byC2, len(uuids))
}
