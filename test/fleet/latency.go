package fleet

import (
	"slices"
	"sync"
	"time"
)

// Latencies collects heartbeat-to-next-command delays, grouped by the phase
// current when each was measured and, within it, by the command that
// ended the wait (a phase's tail is usually one command's).
type Latencies struct {
	mu        sync.Mutex
	phase     string
	byPhase   map[string][]time.Duration
	byCommand map[string]map[string][]time.Duration // phase → command
	order     []string
}

func newLatencies() *Latencies {
	return &Latencies{byPhase: map[string][]time.Duration{}, byCommand: map[string]map[string][]time.Duration{}}
}

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
	if _, ok := l.byPhase[l.phase]; !ok {
		l.order = append(l.order, l.phase)
		l.byCommand[l.phase] = map[string][]time.Duration{}
	}
	l.byPhase[l.phase] = append(l.byPhase[l.phase], d)
	l.byCommand[l.phase][command] = append(l.byCommand[l.phase][command], d)
}

// Summary is the distribution of some delays.
type Summary struct {
	Count    int
	P50, P99 time.Duration
	Max      time.Duration
}

// Phase summarizes one phase's delays; All every delay.
func (l *Latencies) Phase(name string) Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	return summarize(l.byPhase[name])
}

// ByCommand summarizes one phase's delays per command.
func (l *Latencies) ByCommand(phase string) map[string]Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Summary, len(l.byCommand[phase]))
	for cmd, ds := range l.byCommand[phase] {
		out[cmd] = summarize(ds)
	}
	return out
}

// All summarizes every delay measured.
func (l *Latencies) All() Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	var all []time.Duration
	for _, p := range l.order {
		all = append(all, l.byPhase[p]...)
	}
	return summarize(all)
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
