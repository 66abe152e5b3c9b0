package ui_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kilnhq/kiln/test/kilnproc"
)

// BenchmarkConsoleFleet10k measures the console in Chromium with 10,000
// nodes: the time from navigation to the first full render of the fleet
// table (all pages loaded, counts drawn), and the time until 1,000 node
// changes made through the API (maintenance set) are all reflected in the
// table, with the time the API took to accept them for comparison.
//
//	go test -run '^$' -bench ConsoleFleet10k -benchtime 1x ./test/ui
func BenchmarkConsoleFleet10k(b *testing.B) {
	p := startKiln(b)
	enrollMany(b, p, 10000)
	ctx := browser(b, "")
	var first, apiMS, reflected float64
	for i := range b.N {
		if err := chromedp.Do(ctx, chromedp.Navigate(p.URL+"/ui/")); err != nil {
			b.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.body.dataset.ready === "true"`, chromedp.WithPollingTimeout(10*time.Minute))); err != nil {
			b.Fatal(err)
		}
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.kilnReadyAt`))
		if err != nil {
			b.Fatal(err)
		}
		first += ms
		// Filter on maintenance so the page shows how many it knows of.
		on := i%2 == 0
		want := 1000
		if !on {
			want = 0
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.getElementById("search"); s.value = "maintenance=true"; s.dispatchEvent(new Event("input")); return true })()`)); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		setMaintenance(b, p, 1000, on)
		apiMS += float64(time.Since(start).Milliseconds())
		expr := fmt.Sprintf(`document.getElementById("shown").textContent.startsWith("%d of 10000")`, want)
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Minute), chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
			b.Fatal(err)
		}
		reflected += float64(time.Since(start).Milliseconds())
	}
	n := float64(b.N)
	b.ReportMetric(first/n, "first-render-ms")
	b.ReportMetric(apiMS/n, "api-1000-changes-ms")
	b.ReportMetric(reflected/n, "1000-events-reflected-ms")
}

// parallel runs fn(i) for i in [0, n) on 8 workers.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

var uuids []string

func enrollMany(b *testing.B, p *kilnproc.Proc, n int) {
	b.Helper()
	uuids = make([]string, n)
	parallel(n, func(i int) {
		code, doc, err := kilnproc.CallJSON(http.DefaultClient, p.URL, "POST", "/v1/nodes",
			map[string]any{"name": "n" + strconv.Itoa(i), "driver": "fake-hardware"})
		if err != nil || code != 201 {
			b.Errorf("enroll %d: %d %v", i, code, err)
			return
		}
		uuids[i] = doc["uuid"].(string)
	})
	if b.Failed() {
		b.FailNow()
	}
}

func setMaintenance(b *testing.B, p *kilnproc.Proc, n int, on bool) {
	b.Helper()
	parallel(n, func(i int) {
		method := "PUT"
		if !on {
			method = "DELETE"
		}
		code, _, err := kilnproc.CallJSON(http.DefaultClient, p.URL, method, "/v1/nodes/"+uuids[i]+"/maintenance", map[string]any{"reason": "bench"})
		if err != nil || code != 202 {
			b.Errorf("maintenance %s %d: %d %v", method, i, code, err)
		}
	})
}
