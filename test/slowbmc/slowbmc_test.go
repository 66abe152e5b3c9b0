// Package slowbmc checks that slow BMCs cannot cost a live conductor its
// nodes: two real controllers (`kiln serve`) on one database drive 200
// redfish nodes whose simulated BMCs (test/bmcsim) take 2–5 s to answer
// each request, with power-state sync on.
package slowbmc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/kilnproc"
)

var kilnBin string

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin) }

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 60 * time.Second}

func call(tb testing.TB, base, method, path string, body any) (int, map[string]any) {
	tb.Helper()
	code, out, err := kilnproc.CallJSON(client, base, method, path, body)
	if err != nil {
		tb.Fatal(err)
	}
	return code, out
}

// parallel runs f for each index, 16 at a time.
func parallel(n int, f func(i int)) {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

const (
	nodes = 200
	// heartbeat every second, dead after 10 s of silence: ten heartbeats
	// may be lost to a loaded machine before a peer takes over; a
	// heartbeat stuck behind the sync of ~100 nodes at 2–5 s each (the
	// old single housekeeping goroutine) is silent for minutes.
	heartbeatInterval = "1s"
	deadAfter         = 10 * time.Second
	// observe is how long the slow BMCs are watched: several power-sync
	// rounds (every 3 s, 2.25 s budget), several dead-after periods.
	observe = 25 * time.Second
)

// TestSlowBMCs: while every BMC takes 2–5 s per request and power sync
// runs, both conductors stay alive in the store's eyes (every look at the
// conductor rows finds both alive, and their heartbeats keep coming), no
// node changes owner, power sync does reach the BMCs, and the API answers;
// its latency is logged (see latencyNote).
func TestSlowBMCs(t *testing.T) {
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	db := filepath.Join(t.TempDir(), "kiln.db")
	var procs []*kilnproc.Proc
	for i := range 2 {
		procs = append(procs, kilnproc.Start(t, kilnBin, db, "--conductor", fmt.Sprintf("c%d", i+1),
			"--conductor-heartbeat-interval", heartbeatInterval, "--conductor-dead-after", deadAfter.String(),
			"--power-sync-interval", "3s", "--power-sync-workers", "8", "--log-level", "info"))
	}
	api := procs[0].URL

	// Enroll and manage with fast BMCs: the slow part is what follows.
	systemID := lab.BMCs[0].SystemPath(lab.BMCs[0].SystemIDs()[0])
	uuids := make([]string, nodes)
	parallel(nodes, func(i int) {
		b := lab.BMCs[i]
		u, pw := b.Credentials()
		code, out := call(t, api, "POST", "/v1/nodes", map[string]any{
			"driver": "redfish", "name": fmt.Sprintf("slow%03d", i),
			"driver_info": map[string]any{"redfish_address": b.URL, "redfish_username": u, "redfish_password": pw, "redfish_system_id": systemID},
		})
		if code != 201 {
			t.Errorf("create node %d: %d %v", i, code, out)
			return
		}
		uuids[i] = out["uuid"].(string)
	})
	if t.Failed() {
		t.FailNow()
	}
	parallel(nodes, func(i int) {
		for try := 0; ; try++ {
			code, out := call(t, procs[i%2].URL, "PUT", "/v1/nodes/"+uuids[i]+"/states/provision", map[string]any{"target": "manage"})
			if code == 202 {
				return
			}
			if code != 409 || try > 200 {
				t.Errorf("manage %s: %d %v", uuids[i], code, out)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	owners := waitManageable(t, api, uuids)
	perOwner := map[string]int{}
	for _, o := range owners {
		perOwner[o]++
	}
	if len(perOwner) != 2 {
		t.Fatalf("nodes are owned by %v, want both conductors", perOwner)
	}

	st, err := store.Open(context.Background(), db, store.Options{DeadAfter: deadAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logMark := []int{len(procs[0].Logs()), len(procs[1].Logs())}

	// Now every BMC answers each request in 2–5 s.
	for i, b := range lab.BMCs {
		if err := b.SetFaults(bmcsim.Faults{Latency: 2*time.Second + time.Duration(i)*3*time.Second/(nodes-1)}); err != nil {
			t.Fatal(err)
		}
	}
	requestsBefore := sum(lab.Requests())
	counted := []float64{bmcRequestsCounted(t, procs[0].URL), bmcRequestsCounted(t, procs[1].URL)}

	var lat []time.Duration
	byPath := map[string][]time.Duration{}
	var looks int
	beats := map[string]map[time.Time]bool{"c1": {}, "c2": {}}
	end := time.Now().Add(observe)
	for i := 0; time.Now().Before(end); i++ {
		// The conductor rows, as a peer sees them.
		cds, err := st.ListConductors(t.Context(), false)
		if err != nil {
			t.Fatal(err)
		}
		looks++
		alive := map[string]bool{}
		for _, cd := range cds {
			alive[cd.Hostname] = cd.Alive
			if m := beats[cd.Hostname]; m != nil {
				m[cd.UpdatedAt] = true
			}
		}
		if !alive["c1"] || !alive["c2"] {
			t.Fatalf("look %d: conductors alive %v: a peer would take the nodes of a live conductor", looks, alive)
		}
		// A client's requests, on both controllers, timed.
		for kind, path := range map[string]string{"node": "/v1/nodes/" + uuids[i%nodes], "list": "/v1/nodes?limit=50&fields=uuid,power_state",
			"validate": "/v1/nodes/" + uuids[(i*7)%nodes] + "/validate"} {
			base := procs[i%2].URL
			t0 := time.Now()
			code, out := call(t, base, "GET", path, nil)
			d := time.Since(t0)
			lat = append(lat, d)
			byPath[kind] = append(byPath[kind], d)
			if code != 200 {
				t.Fatalf("GET %s: %d %v", path, code, out)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}

	for name, m := range beats {
		// At one heartbeat a second, a 25 s watch sees many; a stalled
		// heartbeat loop would have shown as "not alive" above.
		if len(m) < 3 {
			t.Errorf("conductor %s: only %d distinct heartbeats seen in %d looks", name, len(m), looks)
		}
	}
	for i, p := range procs {
		logs := p.Logs()[logMark[i]:]
		for _, bad := range []string{"conductor ring changed", "conductor heartbeat", "released reservations of dead conductors"} {
			if strings.Contains(logs, bad) {
				t.Errorf("c%d logged %q while the BMCs were slow", i+1, bad)
			}
		}
	}
	now := waitManageable(t, api, uuids)
	for i, u := range uuids {
		if now[i] != owners[i] {
			t.Errorf("node %s changed owner: %s → %s", u, owners[i], now[i])
		}
	}
	requests := sum(lab.Requests()) - requestsBefore
	for i, p := range procs {
		// Power sync's BMC calls are counted in the controller's metrics.
		if after := bmcRequestsCounted(t, p.URL); after <= counted[i] {
			t.Errorf("c%d: kiln_bmc_requests_total{driver=\"redfish\"} stayed at %v while power sync ran", i+1, after)
		}
	}
	if requests == 0 {
		t.Errorf("no BMC requests while the BMCs were slow: power sync did not run")
	}
	t.Logf("%d nodes, BMCs at 2–5 s per request, %s watched: %d looks at the conductor rows, heartbeats seen c1=%d c2=%d; %d BMC requests (power sync) while they were slow",
		nodes, observe, looks, len(beats["c1"]), len(beats["c2"]), requests)
	t.Logf("API latency over %d requests: %s", len(lat), percentiles(lat))
	for _, kind := range []string{"node", "list", "validate"} {
		t.Logf("  GET %s: %s", kind, percentiles(byPath[kind]))
	}
}

// percentiles words p50, p99 and max of d (sorted in place).
func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	slices.Sort(d)
	r := func(x time.Duration) time.Duration { return x.Round(time.Microsecond) }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", r(d[len(d)/2]), r(d[len(d)*99/100]), r(d[len(d)-1]))
}

// waitManageable waits until every node is manageable and returns each
// node's conductor.
func waitManageable(t *testing.T, api string, uuids []string) []string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute) // a safety net only
	for {
		code, out := call(t, api, "GET", "/v1/nodes?limit=1000&fields=uuid,provision_state,conductor,last_error", nil)
		if code != 200 {
			t.Fatalf("list nodes: %d %v", code, out)
		}
		byUUID := map[string]map[string]any{}
		for _, x := range out["nodes"].([]any) {
			m := x.(map[string]any)
			byUUID[m["uuid"].(string)] = m
		}
		owners := make([]string, len(uuids))
		done := 0
		for i, u := range uuids {
			m := byUUID[u]
			if e, _ := m["last_error"].(string); e != "" {
				t.Fatalf("node %s: %s", u, e)
			}
			if m["provision_state"] == "manageable" {
				done++
			}
			owners[i], _ = m["conductor"].(string)
		}
		if done == len(uuids) {
			return owners
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d nodes manageable", done, len(uuids))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// bmcRequestsCounted reads kiln_bmc_requests_total{driver="redfish"} from
// a controller's /metrics.
func bmcRequestsCounted(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, `kiln_bmc_requests_total{driver="redfish"} `); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return 0
}

func sum(s []uint64) uint64 {
	var n uint64
	for _, v := range s {
		n += v
	}
	return n
}
