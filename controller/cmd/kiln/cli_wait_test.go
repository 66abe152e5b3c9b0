package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/proto"
)

func TestProgressText(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		rate        float64
		want        string
	}{
		{0, 0, 0, "0 B"},
		{512, 0, 0, "512 B"},
		{1 << 30, 2 << 30, 0, "1.0 GiB / 2.0 GiB (50%)"},
		{1 << 30, 2 << 30, 100 << 20, "1.0 GiB / 2.0 GiB (50%) 100.0 MiB/s ETA 10s"},
		{3 << 20, 0, 1 << 20, "3.0 MiB 1.0 MiB/s"},
	} {
		if got := progressText(tc.done, tc.total, tc.rate); got != tc.want {
			t.Errorf("progressText(%d, %d, %v) = %q, want %q", tc.done, tc.total, tc.rate, got, tc.want)
		}
	}
}

func TestStatusLineShowsStepProgressAndRate(t *testing.T) {
	tr := &tracked{ident: "n1"}
	w := &waiter{goal: provisionGoal(provisionVerbs[4]), out: &strings.Builder{}, byID: map[string]*tracked{"u": tr}, nodes: []*tracked{tr}, lines: map[*tracked]string{}}
	target := proto.StateActive
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, done := range []int64{100 << 20, 300 << 20} {
		w.update(events.Event{UUID: "u", ProvisionState: proto.StateDeployWait, TargetProvisionState: &target, Step: "deploy.write_image",
			Progress: &events.Progress{Step: "deploy.write_image", BytesDone: done, BytesTotal: 1 << 30, UpdatedAt: &proto.Time{Time: at.Add(time.Duration(i) * 10 * time.Second)}}})
	}
	want := "n1: wait call-back → active, step deploy.write_image 300.0 MiB / 1.0 GiB (29%) 20.0 MiB/s ETA 36s"
	if got := statusLine(tr); got != want {
		t.Errorf("status line:\n got %q\nwant %q", got, want)
	}
	if tr.done {
		t.Error("done while deploying")
	}
	errMsg := "write failed"
	w.update(events.Event{UUID: "u", ProvisionState: proto.StateDeployFailed, TargetProvisionState: &target, LastError: &errMsg})
	if !tr.done || tr.err == nil || !strings.Contains(statusLine(tr), "FAILED: write failed") {
		t.Errorf("after failure: done %v err %v line %q", tr.done, tr.err, statusLine(tr))
	}
}

// Without an event stream (an older controller, a proxy that buffers), --wait polls.
func TestWaitFallsBackToPolling(t *testing.T) {
	p := controller(t)
	target, _ := url.Parse(p.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" {
			http.Error(w, `{"error_message": "{\"faultstring\": \"Not Found\", \"faultcode\": \"Client\", \"debuginfo\": null}"}`, http.StatusNotFound)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "p1", "--driver-info", "fake_deploy_delay=1")
	mustCLI(t, p, "node", "manage", "--wait", "p1")
	var out, errb strings.Builder
	code := run([]string{"node", "provide", "--wait", "p1", "--url", proxy.URL}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "event stream unavailable") || !strings.Contains(out.String(), "p1: available, power off — done") {
		t.Errorf("provide --wait through a proxy without events: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}

// A stream that stays open but carries nothing (the node's changes are made
// by another controller sharing the database, or a proxy buffers them):
// --wait still ends, from its periodic reads of the nodes.
func TestWaitEndsWhenTheStreamIsSilent(t *testing.T) {
	p := controller(t)
	target, _ := url.Parse(p.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(": silent\n\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "s1", "--driver-info", "fake_deploy_delay=1")
	mustCLI(t, p, "node", "manage", "--wait", "s1")
	var out, errb strings.Builder
	code := run([]string{"node", "provide", "--wait", "--timeout", "30s", "s1", "--url", proxy.URL}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "s1: available, power off — done") {
		t.Errorf("provide --wait with a silent stream: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}
