// Package redfishscale checks that one real controller (`kiln serve`)
// drives a rack of simulated Redfish BMCs: N BMCs in this process (one
// listener each, test/bmcsim), N nodes enrolled with the redfish hardware
// type, moved to manageable and powered on and off through the API.
package redfishscale

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// parallel runs f for each item, 16 at a time, as a busy operator's tooling would.
func parallel(items []string, f func(string)) {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(it)
		}()
	}
	wg.Wait()
}

// Figures are what one scale run measured.
type Figures struct {
	Enroll, Manage, PowerOn, PowerOff time.Duration
	RequestsPerNode                   float64
	MaxRequests                       uint64
}

// waitAll polls the node list until every node has field == want, failing
// fast when one reports a last_error.
func waitAll(tb testing.TB, base string, n int, field, want string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, out := call(tb, base, "GET", "/v1/nodes?limit=2000&fields=uuid,"+field+",last_error,provision_state", nil)
		if code != 200 {
			tb.Fatalf("list nodes: %d %v", code, out)
		}
		nodes, _ := out["nodes"].([]any)
		done := 0
		for _, x := range nodes {
			m := x.(map[string]any)
			if fmt.Sprint(m[field]) == want {
				done++
			} else if e, _ := m["last_error"].(string); e != "" {
				tb.Fatalf("node %v failed on the way to %s=%s: %s (state %v)", m["uuid"], field, want, e, m["provision_state"])
			}
		}
		if done == n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d nodes reached %s=%s within %s", done, n, field, want, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func runScale(tb testing.TB, n int, personality string, faults bmcsim.Faults) Figures {
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: n, Personality: personality})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { lab.Close() })
	if err := lab.SetFaults(faults); err != nil {
		tb.Fatal(err)
	}
	systemID := lab.BMCs[0].SystemPath(lab.BMCs[0].SystemIDs()[0])
	p := kilnproc.Start(tb, kilnBin, filepath.Join(tb.TempDir(), "kiln.db"),
		"--conductor", "scale", "--log-level", "warn", "--workers", "64", "--power-sync-interval", "0")
	var f Figures

	start := time.Now()
	idx := make([]string, n)
	for i := range idx {
		idx[i] = fmt.Sprint(i)
	}
	uuids := make([]string, n)
	parallel(idx, func(s string) {
		var i int
		fmt.Sscan(s, &i)
		b := lab.BMCs[i]
		u, pw := b.Credentials()
		code, out := call(tb, p.URL, "POST", "/v1/nodes", map[string]any{
			"driver": "redfish", "name": fmt.Sprintf("rf%04d", i),
			"driver_info": map[string]any{"redfish_address": b.URL, "redfish_username": u, "redfish_password": pw, "redfish_system_id": systemID},
		})
		if code != 201 {
			tb.Errorf("create node %d: %d %v", i, code, out)
			return
		}
		uuids[i] = out["uuid"].(string)
	})
	if tb.Failed() {
		tb.FailNow()
	}
	f.Enroll = time.Since(start)

	phase := func(name string, send func(uuid string) (int, map[string]any), field, want string) time.Duration {
		t0 := time.Now()
		parallel(uuids, func(u string) {
			for try := 0; ; try++ {
				code, out := send(u)
				if code == 202 {
					return
				}
				if code != 409 || try > 100 {
					tb.Errorf("%s %s: %d %v", name, u, code, out)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
		if tb.Failed() {
			tb.FailNow()
		}
		waitAll(tb, p.URL, n, field, want, 5*time.Minute)
		return time.Since(t0)
	}
	f.Manage = phase("manage", func(u string) (int, map[string]any) {
		return call(tb, p.URL, "PUT", "/v1/nodes/"+u+"/states/provision", map[string]any{"target": "manage"})
	}, "provision_state", "manageable")
	f.PowerOn = phase("power on", func(u string) (int, map[string]any) {
		return call(tb, p.URL, "PUT", "/v1/nodes/"+u+"/states/power", map[string]any{"target": "power on"})
	}, "power_state", "power on")
	for i := range n {
		if ps, _ := lab.Memory(i).PowerState(tb.Context()); ps != bmcsim.PowerOn {
			tb.Fatalf("BMC %d reports %s after power on", i, ps)
		}
	}
	f.PowerOff = phase("power off", func(u string) (int, map[string]any) {
		return call(tb, p.URL, "PUT", "/v1/nodes/"+u+"/states/power", map[string]any{"target": "power off"})
	}, "power_state", "power off")
	var total uint64
	for i, r := range lab.Requests() {
		total += r
		f.MaxRequests = max(f.MaxRequests, r)
		if ps, _ := lab.Memory(i).PowerState(tb.Context()); ps != bmcsim.PowerOff {
			tb.Fatalf("BMC %d reports %s after power off", i, ps)
		}
		if s := lab.BMCs[i].Sessions(); s != 1 {
			tb.Errorf("BMC %d has %d sessions open, want the one cached session", i, s)
		}
	}
	f.RequestsPerNode = float64(total) / float64(n)
	return f
}

// TestScale enrolls 1,000 redfish nodes on one controller (200 with -short)
// and powers them on and off; it checks every BMC ends in the right state
// with one session, and logs the figures.
func TestScale(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	f := runScale(t, n, "generic", bmcsim.Faults{})
	t.Logf("%d nodes: enroll %s, manage %s, power on %s, power off %s; BMC requests per node %.1f (max %d)",
		n, f.Enroll.Round(time.Millisecond), f.Manage.Round(time.Millisecond), f.PowerOn.Round(time.Millisecond),
		f.PowerOff.Round(time.Millisecond), f.RequestsPerNode, f.MaxRequests)
	// Validate+power read on manage, then GET+reset+GET per power change,
	// plus service root and login once: anything far above means lost
	// sessions or retries.
	if f.RequestsPerNode > 15 {
		t.Errorf("%.1f BMC requests per node, expected about 10", f.RequestsPerNode)
	}
}

// BenchmarkScale1000 reports the same figures as metrics.
func BenchmarkScale1000(b *testing.B) { benchScale(b, "generic", bmcsim.Faults{}) }

// BenchmarkScale1000Faulty: iDRAC personality, 20 ms per answer and 5 % of
// answers a 503, as a busy rack of real BMCs.
func BenchmarkScale1000Faulty(b *testing.B) {
	benchScale(b, "idrac", bmcsim.Faults{Latency: 20 * time.Millisecond, ErrorRate: 0.05, ErrorStatus: 503})
}

func benchScale(b *testing.B, personality string, faults bmcsim.Faults) {
	for range b.N {
		f := runScale(b, 1000, personality, faults)
		b.ReportMetric(f.Manage.Seconds(), "s-manage")
		b.ReportMetric(f.PowerOn.Seconds(), "s-power-on")
		b.ReportMetric(f.PowerOff.Seconds(), "s-power-off")
		b.ReportMetric(f.RequestsPerNode, "bmc-requests/node")
		b.ReportMetric(float64(f.MaxRequests), "max-bmc-requests")
	}
}

// TestOutOfBandInspection inspects redfish nodes of every personality
// through the controller: properties and ports come from the BMC.
func TestOutOfBandInspection(t *testing.T) {
	p := kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), "--conductor", "inspect", "--log-level", "warn", "--power-sync-interval", "0")
	for i, personality := range bmcsim.PersonalityNames() {
		t.Run(personality, func(t *testing.T) {
			pers, err := bmcsim.LookupPersonality(personality)
			if err != nil {
				t.Fatal(err)
			}
			// A distinct MAC per BMC: ports are unique across nodes.
			lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: personality, NewBackend: func(int) (bmcsim.Backend, error) {
				return bmcsim.NewMemory(100+i, bmcsim.Inventory{Manufacturer: pers.Manufacturer, Model: pers.Model}), nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer lab.Close()
			b := lab.BMCs[0]
			u, pw := b.Credentials()
			code, out := call(t, p.URL, "POST", "/v1/nodes", map[string]any{"driver": "redfish", "inspect_interface": "redfish",
				"driver_info": map[string]any{"redfish_address": b.URL, "redfish_username": u, "redfish_password": pw}})
			if code != 201 {
				t.Fatalf("create: %d %v", code, out)
			}
			uuid := out["uuid"].(string)
			for _, verb := range []string{"manage", "inspect"} {
				if code, out := call(t, p.URL, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": verb}); code != 202 {
					t.Fatalf("%s: %d %v", verb, code, out)
				}
				deadline := time.Now().Add(30 * time.Second)
				for {
					_, n := call(t, p.URL, "GET", "/v1/nodes/"+uuid, nil)
					if n["provision_state"] == "manageable" && n["reservation"] == nil && (verb == "manage" || n["inspection_finished_at"] != nil) {
						break
					}
					if e, _ := n["last_error"].(string); e != "" || time.Now().After(deadline) {
						t.Fatalf("%s: state %v last_error %v", verb, n["provision_state"], n["last_error"])
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			_, n := call(t, p.URL, "GET", "/v1/nodes/"+uuid, nil)
			props, _ := n["properties"].(map[string]any)
			inv := lab.Memory(0).Inventory()
			if fmt.Sprint(props["cpus"]) != fmt.Sprint(inv.CPUCount) || props["cpu_arch"] != "x86_64" || fmt.Sprint(props["memory_mb"]) != fmt.Sprint(inv.MemoryGiB*1024) {
				t.Errorf("properties %v, BMC inventory %+v", props, inv)
			}
			_, ports := call(t, p.URL, "GET", "/v1/ports?node_uuid="+uuid, nil)
			list, _ := ports["ports"].([]any)
			if len(list) != len(inv.NICs) || strings.ToLower(fmt.Sprint(list[0].(map[string]any)["address"])) != strings.ToLower(inv.NICs[0].MAC) {
				t.Errorf("ports %v, NICs %v", list, inv.NICs)
			}
		})
	}
}
