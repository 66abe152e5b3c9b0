package fleet

import (
	"slices"
	"sync"
	"time"
)

// Latencies collects heartbeat-to-next-command delays, grouped by the phase
// current when each was measured and by the command that ended the wait
// (a phase's tail is usually one command's).
type Latencies struct {
	mu     sync.Mutex
	phase  string
	delays map[sample][]time.Duration
}

// sample is where a delay is counted.
type sample struct{ phase, command string }

func newLatencies() *Latencies { return &Latencies{delays: map[sample][]time.Duration{}} }

// SetPhase names the phase later measurements belong to.
func (l *Latencies) SetPhase(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = name
}

// Add records one delay, which ended with command (the agent command's
// name, such as "deploy.execute_deploy_step").
func (l *Latencies) Add(d time.Duration, command string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := sample{l.phase, command}
	l.delays[k] = append(l.delays[k], d)
}

// Summary is the distribution of some delays.
type Summary struct {
	Count    int
	P50, P99 time.Duration
	Max      time.Duration
}

// Phase summarizes one phase's delays.
func (l *Latencies) Phase(name string) Summary {
	return l.summarize(func(k sample) bool { return k.phase == name })
}

// All summarizes every delay measured.
func (l *Latencies) All() Summary { return l.summarize(func(sample) bool { return true }) }

// ByCommand summarizes one phase's delays per command.
func (l *Latencies) ByCommand(phase string) map[string]Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]Summary{}
	for k, ds := range l.delays {
		if k.phase == phase {
			out[k.command] = summarize(ds)
		}
	}
	return out
}

// summarize summarizes the delays counted where keep says.
func (l *Latencies) summarize(keep func(sample) bool) Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for k, d := range l.delays {
		if keep(k) {
			ds = append(ds, d...)
		}
	}
	return summarize(ds)
}

// summarize computes nearest-rank percentiles (the smallest value with at
// least p% of the values at or below it).
func summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return Summary{Count: len(s), P50: rank(s, 50), P99: rank(s, 99), Max: s[len(s)-1]}
}

func rank(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(i, 0)]
}
