// Package phases times a node's provisioning phase by phase for tests
// that report figures: it follows the node on a controller's GET
// /v1/events stream (changes are pushed as they are committed, so a
// short step is never missed as it can be by polling) and charges each
// phase with the BMC requests made meanwhile.
package phases

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Phase is a run of events with the same label: the running step
// prefixed by the kind of flow ("clean bios.apply_configuration"), else
// the provision state ("inspecting").
type Phase struct {
	Name string
	// Wall runs from the phase's first event to the next phase's first
	// (the controller's timestamps).
	Wall time.Duration
	// Requests is the BMC's request count between the same two events,
	// read as each event arrives.
	Requests uint64
}

// Recorder follows one node; Stop returns its phases.
type Recorder struct {
	resp *http.Response
	done chan struct{}

	mu      sync.Mutex
	samples []sample
}

type sample struct {
	at       time.Time
	requests uint64
	label    string
}

// Record starts following node (UUID or name) on the controller at base;
// requests reads the BMC's request counter.
func Record(client *http.Client, base, node string, requests func() uint64) (*Recorder, error) {
	resp, err := client.Get(base + "/v1/events?node=" + node)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET /v1/events: HTTP %d", resp.StatusCode)
	}
	r := &Recorder{resp: resp, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			n := requests()
			var e struct {
				ProvisionState string    `json:"provision_state"`
				Step           string    `json:"step"`
				Time           time.Time `json:"time"`
			}
			if json.Unmarshal([]byte(data), &e) != nil || e.ProvisionState == "" {
				continue
			}
			r.mu.Lock()
			r.samples = append(r.samples, sample{at: e.Time, requests: n, label: Label(e.ProvisionState, e.Step)})
			r.mu.Unlock()
		}
	}()
	return r, nil
}

// Stop ends the stream and returns the phases seen, without the states a
// node rests in between two requests (enroll, manageable, available,
// active) and without the last phase, which nothing ended.
func (r *Recorder) Stop() []Phase {
	r.resp.Body.Close()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return split(r.samples)
}

func split(samples []sample) []Phase {
	var out []Phase
	for i := 0; i < len(samples); {
		j := i + 1
		for j < len(samples) && samples[j].label == samples[i].label {
			j++
		}
		if j < len(samples) && !resting[samples[i].label] {
			out = append(out, Phase{Name: samples[i].label, Wall: samples[j].at.Sub(samples[i].at),
				Requests: samples[j].requests - samples[i].requests})
		}
		i = j
	}
	return out
}

var resting = map[string]bool{"enroll": true, "manageable": true, "available": true, "active": true}

// Label names a node's phase from its provision state and running step.
func Label(state, step string) string {
	if step == "" {
		return state
	}
	switch state {
	case "cleaning", "clean wait":
		return "clean " + step
	case "deploying", "wait call-back":
		return "deploy " + step
	case "servicing", "service wait":
		return "service " + step
	}
	return state + " " + step
}

// Table formats phases one a line, with a total, each line prefixed.
func Table(prefix string, ps []Phase) string {
	var b strings.Builder
	var total time.Duration
	var reqs uint64
	for _, p := range ps {
		fmt.Fprintf(&b, "%s %-38s %9s %4d BMC requests\n", prefix, p.Name, p.Wall.Round(time.Millisecond), p.Requests)
		total += p.Wall
		reqs += p.Requests
	}
	fmt.Fprintf(&b, "%s %-38s %9s %4d BMC requests\n", prefix, "total", total.Round(time.Millisecond), reqs)
	return b.String()
}
