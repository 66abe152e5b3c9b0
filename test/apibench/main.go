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
		conc        = flag.Int("c", 16, "concurrent connections")
		dur         = flag.Duration("d", 10*time.Second, "duration of each route")
		version     = flag.String("version", "1.82", "microversion sent")
		token       = flag.String("token", "", "X-Auth-Token sent, if the endpoints need one")
		routeFilter = flag.String("routes", "", "comma-separated route names to run (default: all)")
	)
	flag.Parse()
	eps := []endpoint{{"first", *url1, *pid1}}
	if *url2 != "" {
		eps = append(eps, endpoint{"second", *url2, *pid2})
	}
	cl := &client{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc * 2}, Timeout: time.Minute},
		version: *version, token: *token}
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "route\tendpoint\treq/s\tserver CPU-ms/req\tbytes/resp\tstatuses\t\n")
	for _, ep := range eps {
		if *enroll > 0 {
			start := time.Now()
			cpu0 := cpuOf(ep.pid)
			if err := cl.enroll(ep.url, *enroll); err != nil {
				fmt.Fprintf(os.Stderr, "enroll on %s: %v\n", ep.url, err)
				os.Exit(1)
			}
			fmt.Printf("%s: enrolled %d nodes and ports, one POST at a time, in %s (server CPU %s)\n",
				ep.url, *enroll, time.Since(start).Round(time.Millisecond), (cpuOf(ep.pid) - cpu0).Round(time.Millisecond))
		}
	}
	for _, ep := range eps {
		node, err := cl.firstNode(ep.url)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", ep.url, err)
			os.Exit(1)
		}
		for _, r := range routes(node) {
			if *routeFilter != "" && !contains(strings.Split(*routeFilter, ","), r.name) {
				continue
			}
			res := cl.run(ep, r, *conc, *dur)
			cpu := "-"
			if ep.pid != 0 && res.count > 0 {
				cpu = fmt.Sprintf("%.3f", float64(res.cpu.Microseconds())/1000/float64(res.count))
			}
			bytesPer := int64(0)
			if res.count > 0 {
				bytesPer = res.bytes / res.count
			}
			fmt.Fprintf(out, "%s\t%s\t%.0f\t%s\t%d\t%s\t\n", r.name, ep.url, float64(res.count)/res.elapsed.Seconds(), cpu, bytesPer, res.statuses())
		}
	}
	out.Flush()
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
	name, method, path, body string
}

// routes are the comparison table's routes.
func routes(node string) []route {
	return []route{
		{"nodes?limit=100", "GET", "/v1/nodes?limit=100", ""},
		{"nodes/detail?limit=100", "GET", "/v1/nodes/detail?limit=100", ""},
		{"nodes/{uuid}", "GET", "/v1/nodes/" + node, ""},
		{"ports?limit=100", "GET", "/v1/ports?limit=100", ""},
		{"ports/detail?limit=100", "GET", "/v1/ports/detail?limit=100", ""},
		{"heartbeat", "POST", "/v1/heartbeat/" + node,
			`{"callback_url":"http://192.0.2.10:9999","agent_version":"10.0.0","agent_token":"apibench-token"}`},
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
	// Warm up the connections and caches.
	for range conc {
		c.do(context.Background(), r.method, ep.url+r.path, r.body) //nolint:errcheck // warm-up
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var count, nbytes atomic.Int64
	var wg sync.WaitGroup
	cpu0 := cpuOf(ep.pid)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[int]int64{}
			for ctx.Err() == nil {
				code, n, err := c.do(ctx, r.method, ep.url+r.path, r.body)
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
	return res
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
