package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// cpuOf counts a process's descendants: a child that burns CPU raises its
// parent's figure.
func TestCPUOfCountsDescendants(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: ", err)
	}
	if f := statFields(os.Getpid()); f == nil || f[1] != strconv.Itoa(os.Getppid()) {
		t.Fatalf("statFields(self) = %v, want ppid %d at [1]", f, os.Getppid())
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh: ", err)
	}
	cmd := exec.Command(sh, "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	before := cpuOf(os.Getpid())
	deadline := time.Now().Add(time.Minute) // a safety net only: the loop ends as soon as CPU is seen
	for cpuOf(os.Getpid())-before < 3*clockTick {
		if time.Now().After(deadline) {
			t.Fatal("the busy child's CPU never showed in its parent's figure")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cpuOf(0) != 0 {
		t.Error("cpuOf(0) must be 0 (no process given)")
	}
}

// run counts every answer by status, sends the route's method and body,
// and the microversion header.
func TestRunCountsAnswers(t *testing.T) {
	var bad atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-OpenStack-Ironic-API-Version") != "1.82" || r.Method != "POST" {
			bad.Store(true)
		}
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	cl := &client{http: srv.Client(), version: "1.82"}
	res := cl.run(endpoint{url: srv.URL}, route{name: "hb", method: "POST", reqs: []request{{"/v1/heartbeat/x", `{}`}}}, 2, 200*time.Millisecond)
	if res.count == 0 || res.codes[http.StatusAccepted] != res.count || res.bytes != 2*res.count {
		t.Errorf("count %d, codes %v, bytes %d", res.count, res.codes, res.bytes)
	}
	if bad.Load() {
		t.Error("a request lacked the microversion or the method")
	}
	if s := res.statuses(); !strings.HasPrefix(s, "202×") {
		t.Errorf("statuses %q", s)
	}
}

// TestRouteNext: with more requests than connections, each connection
// sends its own requests (j%conc == i) in turn and all are sent; with
// fewer, connection i keeps to request i%len.
func TestRouteNext(t *testing.T) {
	for _, tc := range []struct {
		reqs, conc int
		want       [][]int // per connection, the first requests it sends
	}{
		{reqs: 7, conc: 3, want: [][]int{{0, 3, 6, 0}, {1, 4, 1}, {2, 5, 2}}},
		{reqs: 6, conc: 3, want: [][]int{{0, 3, 0}, {1, 4, 1}, {2, 5, 2}}},
		{reqs: 2, conc: 3, want: [][]int{{0, 0}, {1, 1}, {0, 0}}},
		{reqs: 3, conc: 3, want: [][]int{{0, 0}, {1, 1}, {2, 2}}},
	} {
		r := route{reqs: make([]request, tc.reqs)}
		for i, want := range tc.want {
			j := i % tc.reqs
			got := []int{j}
			for len(got) < len(want) {
				j = r.next(i, j, tc.conc)
				got = append(got, j)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%d requests, %d connections: connection %d sends %v, want %v", tc.reqs, tc.conc, i, got, want)
			}
		}
	}
}
