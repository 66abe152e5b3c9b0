package bmcsim

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// TestScale1000BMCs starts 1,000 BMCs, each on its own 127.0.0.1 port, powers
// every one on and off over HTTP and checks states and request counts.
func TestScale1000BMCs(t *testing.T) {
	const n = 1000
	lab := startLab(t, n, "generic")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxIdleConns: 64}}
	defer client.CloseIdleConnections()

	jobs := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				if err := cycle(t, client, lab.BMCs[i]); err != nil {
					errs <- fmt.Errorf("BMC %d: %w", i, err)
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, c := range lab.Requests() {
		if c != 4 {
			t.Errorf("BMC %d served %d requests, want 4", i, c)
		}
		if m := lab.Memory(i); len(m.Boots()) != 1 {
			t.Errorf("BMC %d booted %d times", i, len(lab.Memory(i).Boots()))
		}
	}
}

func cycle(t *testing.T, c *http.Client, b *BMC) error {
	u, p := b.Credentials()
	sys := b.URL + b.SystemPath(b.SystemIDs()[0])
	for _, step := range []struct {
		reset, want string
	}{{"On", "On"}, {"ForceOff", "Off"}} {
		if st, _, _ := do(t, c, "POST", sys+"/Actions/ComputerSystem.Reset", u, p, map[string]string{"ResetType": step.reset}); st != 204 {
			return fmt.Errorf("reset %s: status %d", step.reset, st)
		}
		st, _, m := do(t, c, "GET", sys, u, p, nil)
		if st != 200 || m["PowerState"] != step.want {
			return fmt.Errorf("after %s: status %d power %v", step.reset, st, m["PowerState"])
		}
	}
	return nil
}
