// Command apibench measures an Ironic-compatible API the way operators'
// tools load it: for each route of the comparison table (node list, detail,
// get, port list, heartbeat) it sends requests from -c connections for -d
// and reports requests per second and the server's CPU per request, read
// from /proc/<pid>/stat of the server process and its descendants (uwsgi
// workers, for instance). On a machine shared with other work, CPU per
// request is the steady figure; requests per second depend on the
// neighbours.
//
// Given -url2 (and -pid2), it measures a second endpoint, such as an Ironic
// run by the reader, the same way, after enrolling the same node set there.
//
//	go run ./test/apibench -url http://127.0.0.1:6385 -pid $(pidof kiln) -enroll 1000
//	go run ./test/apibench -url … -pid … -url2 http://ironic:6385 -pid2 <uwsgi master pid>
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

type endpoint struct {
	name string
	url  string
	pid  int
}

func main() {
	var (
		url1, url2  = flag.String("url", "http://127.0.0.1:6385", "first endpoint (Kiln)"), flag.String("url2", "", "second endpoint (e.g. Ironic), optional")
		pid1, pid2  = flag.Int("pid", 0, "server process of -url (0: no CPU figures)"), flag.Int("pid2", 0, "server process of -url2 (its descendants count too)")
		enroll      = flag.Int("enroll", 0, "enroll this many fake-hardware nodes with a port each on every endpoint first (the same set)")
		agents      = flag.Int("agents", 16, "nodes the heartbeat route drives to wait call-back (one agent each)")
		imageURL    = flag.String("image-url", "", "image_source of those deploys, fetched by the endpoint (default: served by apibench on 127.0.0.1)")
		conc        = flag.Int("c", 16, "concurrent connections")
		dur         = flag.Duration("d", 10*time.Second, "duration of each route in each round")
		rounds      = flag.Int("rounds", 1, "rounds; each runs every route on every endpoint in turn, so that both see the same neighbours")
		version     = flag.String("version", "1.82", "microversion sent")
		token       = flag.String("token", "", "X-Auth-Token sent, if the endpoints need one")
		routeFilter = flag.String("routes", "", "comma-separated route names to run (default: all)")
		hbRoute     = flag.String("heartbeat-route", "heartbeat", "name of the heartbeat route (e.g. heartbeat-written for a run whose servers record every heartbeat)")
	)
	flag.Parse()
	eps := []endpoint{{"first", *url1, *pid1}}
	if *url2 != "" {
		eps = append(eps, endpoint{"second", *url2, *pid2})
	}
	cl := &client{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc * 2}, Timeout: time.Minute},
		version: *version, token: *token}
	selected := func(name string) bool {
		return *routeFilter == "" || contains(strings.Split(*routeFilter, ","), name)
	}
	if *imageURL == "" && selected(*hbRoute) {
		srv := imageServer()
		defer srv.Close()
		*imageURL = srv.URL + "/apibench.img"
	}
	routesOf := make([][]route, len(eps))
	for i, ep := range eps {
		if *enroll > 0 {
			start := time.Now()
			cpu0 := cpuOf(ep.pid)
			if err := cl.enroll(ep.url, *enroll); err != nil {
				fail("enroll on %s: %v", ep.url, err)
			}
			fmt.Printf("%s: enrolled %d nodes and ports, one POST at a time, in %s (server CPU %s)\n",
				ep.url, *enroll, time.Since(start).Round(time.Millisecond), (cpuOf(ep.pid) - cpu0).Round(time.Millisecond))
		}
		node, err := cl.firstNode(ep.url)
		if err != nil && *routeFilter != *hbRoute { // the heartbeat route enrolls its own
			fail("%s: %v", ep.url, err)
		}
		var ags []agent
		if selected(*hbRoute) {
			start := time.Now()
			if ags, err = cl.prepareAgents(ep.url, *agents, *imageURL); err != nil {
				fail("%s: heartbeat nodes: %v", ep.url, err)
			}
			fmt.Printf("%s: %d nodes deployed to wait call-back, in maintenance, tokens from lookup, in %s\n",
				ep.url, len(ags), time.Since(start).Round(time.Millisecond))
		}
		for _, r := range routes(node, ags, *hbRoute) {
			if selected(r.name) {
				routesOf[i] = append(routesOf[i], r)
			}
		}
	}
	// Rounds alternate the endpoints route by route: on a shared machine
	// both are measured under the same load.
	total := make([][]*result, len(eps))
	for i := range eps {
		total[i] = make([]*result, len(routesOf[i]))
		for j := range total[i] {
			total[i][j] = &result{codes: map[int]int64{}}
		}
	}
	for range *rounds {
		for j := range routesOf[0] {
			for i, ep := range eps {
				if j < len(routesOf[i]) {
					total[i][j].add(cl.run(ep, routesOf[i][j], *conc, *dur))
				}
			}
		}
	}
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "route\tendpoint\treq/s\tserver CPU-ms/req\tbytes/resp\tstatuses\t"
	if len(eps) > 1 {
		header += "CPU ratio second/first\t"
	}
	fmt.Fprintln(out, header)
	for j, r := range routesOf[0] {
		for i, ep := range eps {
			if j >= len(total[i]) {
				continue
			}
			res := total[i][j]
			line := fmt.Sprintf("%s\t%s\t%.0f\t%s\t%d\t%s\t", r.name, ep.url, res.rate(), fmtMs(res.cpuPerReq(ep.pid)), res.bytesPer(), res.statuses())
			if i > 0 {
				line += ratio(total[0][j].cpuPerReq(eps[0].pid), res.cpuPerReq(ep.pid)) + "\t"
			} else if len(eps) > 1 {
				line += "\t"
			}
			fmt.Fprintln(out, line)
		}
	}
	out.Flush()
	for j, r := range routesOf[0] {
		if r.name != *hbRoute {
			continue
		}
		for i, ep := range eps {
			if j < len(total[i]) {
				fmt.Printf("%s on %s: database writes per request: %s\n", r.name, ep.url, total[i][j].writesPerReq())
			}
		}
	}
	if *rounds > 1 {
		fmt.Printf("%d rounds of %s per route and endpoint, endpoints alternated route by route\n", *rounds, *dur)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func fmtMs(ms float64) string {
	if ms < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", ms)
}

func ratio(first, second float64) string {
	if first <= 0 || second < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f×", second/first)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

type route struct {
	name, method string
	// reqs are the requests of the route: connection i sends reqs[i%len]
	// when there are no more requests than connections, else, in turn,
	// those reqs[j] with j%conc == i; so each heartbeating node has one
	// agent, as in a fleet, and a route of many agents visits them all.
	reqs []request
	// writes: read the endpoint's database writes around the run (the
	// heartbeat route: whether its heartbeats rewrote nodes).
	writes bool
}

// next is the index of the request connection i of conc sends after
// request j (owned): the next one it owns, wrapping around.
func (r route) next(i, j, conc int) int {
	if len(r.reqs) <= conc {
		return i % len(r.reqs)
	}
	if j += conc; j >= len(r.reqs) {
		j = i
	}
	return j
}

type request struct{ path, body string }

func get(name, path string) route {
	return route{name: name, method: "GET", reqs: []request{{path, ""}}}
}

// routes are the comparison table's routes; the heartbeat's (named
// hbName) are those of agents, one per node.
func routes(node string, agents []agent, hbName string) []route {
	hb := route{name: hbName, method: "POST", writes: true}
	for _, a := range agents {
		hb.reqs = append(hb.reqs, request{"/v1/heartbeat/" + a.uuid, a.heartbeat()})
	}
	return []route{
		get("nodes?limit=100", "/v1/nodes?limit=100"),
		get("nodes/detail?limit=100", "/v1/nodes/detail?limit=100"),
		get("nodes/{uuid}", "/v1/nodes/"+node),
		get("ports?limit=100", "/v1/ports?limit=100"),
		get("ports/detail?limit=100", "/v1/ports/detail?limit=100"),
		hb,
	}
}

type client struct {
	http    *http.Client
	version string
	token   string
}

func (c *client) do(ctx context.Context, method, url, body string) (int, int64, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", c.version)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, n, err
}

// enroll creates n nodes with a port each, one request at a time, named and
// addressed the same on every endpoint.
func (c *client) enroll(base string, n int) error {
	ctx := context.Background()
	for i := range n {
		body, _ := json.Marshal(map[string]any{"driver": "fake-hardware", "name": fmt.Sprintf("apibench-%06d", i),
			"driver_info": map[string]any{"ipmi_address": "192.0.2.1", "ipmi_password": "secret"},
			"properties":  map[string]any{"cpus": 8, "memory_mb": 16384, "local_gb": 100, "cpu_arch": "x86_64"}})
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/nodes", bytes.NewReader(body))
		req.Header.Set("X-OpenStack-Ironic-API-Version", c.version)
		req.Header.Set("Content-Type", "application/json")
		if c.token != "" {
			req.Header.Set("X-Auth-Token", c.token)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		var created struct {
			UUID string `json:"uuid"`
		}
		err = json.NewDecoder(resp.Body).Decode(&created)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || err != nil {
			return fmt.Errorf("create node %d: status %d (%v)", i, resp.StatusCode, err)
		}
		port := fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:00:%02x:%02x:%02x"}`, created.UUID, i>>16&0xff, i>>8&0xff, i&0xff)
		if code, _, err := c.do(ctx, "POST", base+"/v1/ports", port); err != nil || code != http.StatusCreated {
			return fmt.Errorf("create port %d: status %d (%v)", i, code, err)
		}
	}
	return nil
}

func (c *client) firstNode(base string) (string, error) {
	req, _ := http.NewRequest("GET", base+"/v1/nodes?limit=1", nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", c.version)
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var list struct {
		Nodes []struct {
			UUID string `json:"uuid"`
		} `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Nodes) == 0 {
		return "", errors.New("no nodes to measure (use -enroll N)")
	}
	return list.Nodes[0].UUID, nil
}

type result struct {
	count, bytes int64
	elapsed      time.Duration
	cpu          time.Duration
	mu           sync.Mutex
	codes        map[int]int64
	writes       map[string]float64 // database writes by kind during the run; nil if unknown
}

// add accumulates o, a run of the same route on the same endpoint.
func (r *result) add(o *result) {
	r.count += o.count
	r.bytes += o.bytes
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	for k, v := range o.codes {
		r.codes[k] += v
	}
	if o.writes != nil {
		if r.writes == nil {
			r.writes = map[string]float64{}
		}
		for k, v := range o.writes {
			r.writes[k] += v
		}
	}
}

func (r *result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.count) / r.elapsed.Seconds()
}

// cpuPerReq is the server's CPU-ms per request; -1 without a process or
// requests to measure it.
func (r *result) cpuPerReq(pid int) float64 {
	if pid == 0 || r.count == 0 {
		return -1
	}
	return float64(r.cpu.Microseconds()) / 1000 / float64(r.count)
}

func (r *result) bytesPer() int64 {
	if r.count == 0 {
		return 0
	}
	return r.bytes / r.count
}

func (r *result) statuses() string {
	var keys []int
	for k := range r.codes {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		name := strconv.Itoa(k)
		if k == 0 {
			name = "error"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, r.codes[k]))
	}
	return strings.Join(parts, " ")
}

// run loads one route on one endpoint for d from conc goroutines.
func (c *client) run(ep endpoint, r route, conc int, d time.Duration) *result {
	res := &result{codes: map[int]int64{}}
	// Warm up the connections and caches, and send each request once (an
	// agent's first heartbeat records its URL: not the steady cost).
	for i := range max(conc, len(r.reqs)) {
		q := r.reqs[i%len(r.reqs)]
		c.do(context.Background(), r.method, ep.url+q.path, q.body) //nolint:errcheck // warm-up
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var count, nbytes atomic.Int64
	var wg sync.WaitGroup
	cpu0 := cpuOf(ep.pid)
	start := time.Now()
	var writes0 map[string]float64
	if r.writes {
		writes0 = writesOf(c.http, ep.url)
	}
	for i := range conc {
		wg.Add(1)
		j := i % len(r.reqs)
		go func() {
			defer wg.Done()
			local := map[int]int64{}
			for ; ctx.Err() == nil; j = r.next(i, j, conc) {
				q := r.reqs[j]
				code, n, err := c.do(ctx, r.method, ep.url+q.path, q.body)
				if ctx.Err() != nil {
					break
				}
				if err != nil {
					code = 0
				}
				local[code]++
				count.Add(1)
				nbytes.Add(n)
			}
			res.mu.Lock()
			for k, v := range local {
				res.codes[k] += v
			}
			res.mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.cpu = cpuOf(ep.pid) - cpu0
	res.count, res.bytes = count.Load(), nbytes.Load()
	if writes0 == nil {
		return res
	}
	if writes1 := writesOf(c.http, ep.url); writes1 != nil {
		res.writes = map[string]float64{}
		for k, v := range writes1 {
			res.writes[k] = v - writes0[k]
		}
	}
	return res
}

// writesOf is the endpoint's committed database writes by kind, from
// Kiln's /metrics (kiln_store_writes_total); nil when it has none (Ironic).
// The writes of a route tell whether its heartbeats rewrote nodes.
func writesOf(cl *http.Client, base string) map[string]float64 {
	resp, err := cl.Get(base + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	var out map[string]float64
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, `kiln_store_writes_total{kind="`)
		if !ok {
			continue
		}
		kind, val, ok := strings.Cut(rest, `"} `)
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if !ok || err != nil {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[kind] = v
	}
	return out
}

// writesPerReq names the kinds of writes a route made, per request, e.g.
// "record_seen 0.98, record_agent 0.02"; "-" when unknown.
func (r *result) writesPerReq() string {
	if r.writes == nil || r.count == 0 {
		return "-"
	}
	var kinds []string
	for k, v := range r.writes {
		if v > 0 {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	if len(kinds) == 0 {
		return "none"
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %.2f", k, r.writes[k]/float64(r.count))
	}
	return strings.Join(parts, ", ")
}

// clockTick is the unit of /proc/<pid>/stat times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuOf is the user and system CPU time of pid and its live descendants,
// plus that of descendants they have reaped.
func cpuOf(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	children := map[int][]int{}
	stats := map[int][]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := statFields(p)
		if f == nil {
			continue
		}
		stats[p] = f
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
	}
	var total time.Duration
	var walk func(int)
	walk = func(p int) {
		if f, ok := stats[p]; ok {
			for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
				v, _ := strconv.ParseInt(f[i], 10, 64)
				total += time.Duration(v) * clockTick
			}
		}
		for _, c := range children[p] {
			walk(c)
		}
	}
	walk(pid)
	return total
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (state is [0], ppid [1], utime [11]…).
func statFields(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return nil
	}
	return f
}
