// Package steps is the agent's step machinery: hardware managers offer clean,
// deploy and service steps; a Set collects them with ironic-python-agent's
// merging rules and dispatches execute calls to the best manager.
//
// Every step, built in or from a plugin, is declared the same way: a Def
// (kind, name, interface, priority, argsinfo, reboot_requested, abortable,
// timeout and the function that runs it), grouped into a Manager (name,
// version, support level). Go code builds managers with NewManager (the
// agent's generic manager takes Deps.Steps; other managers Register in
// init); executables in a plugin directory describe their Defs in JSON and
// become managers the same way (see PLUGINS.md).
package steps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/kilnhq/kiln/proto"
)

// SupportLevel is what a manager's Evaluate reports for this machine (IPA's
// HardwareSupport): managers with None are ignored; higher wins.
type SupportLevel int

// Support levels, as IPA numbers them.
const (
	SupportNone            SupportLevel = 0
	SupportGeneric         SupportLevel = 1
	SupportMainline        SupportLevel = 2
	SupportServiceProvider SupportLevel = 3
)

// Node and Ports are the node and port dicts the controller sends (secrets masked).
type (
	Node  = map[string]any
	Ports = []map[string]any
)

// ErrIncompatibleHardwareMethod makes the dispatcher try the next manager.
var ErrIncompatibleHardwareMethod = errors.New("incompatible hardware method")

// Call is one execute_X_step invocation as a manager sees it.
type Call struct {
	Kind proto.StepKind
	// Step is the step as the controller sent it; Step.Args are its arguments.
	Step  proto.StepCall
	Node  Node
	Ports Ports
	// Safety says which block devices destructive steps may touch.
	Safety Safety
	// Log receives the step's log lines; never nil when built by Set.Execute.
	Log *slog.Logger
	// Progress, when set, publishes progress in the command result.
	Progress func(proto.CommandProgress)
}

// Report publishes progress if someone listens.
func (c Call) Report(p proto.CommandProgress) {
	if c.Progress != nil {
		c.Progress(p)
	}
}

// VersionMismatchError is returned by Set.Execute when the controller's version
// map differs from the agent's: the command ends CLEAN_VERSION_MISMATCH.
type VersionMismatchError struct {
	Agent, Controller map[string]string
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("hardware manager version mismatch: agent has %v, controller sent %v", e.Agent, e.Controller)
}

// ---------------------------------------------------------------------------
// Registry of built-in managers (Caddy style: Register in init()).

var (
	regMu    sync.Mutex
	registry = map[string]*Manager{}
)

// Register adds a built-in manager; call it from init(). An empty or duplicate
// name panics: two managers cannot share a key in hardware_manager_version.
func Register(m *Manager) {
	regMu.Lock()
	defer regMu.Unlock()
	name := m.Name()
	if name == "" {
		panic("steps: Register of a manager without a name")
	}
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("steps: manager %q registered twice", name))
	}
	registry[name] = m
}

// Registered returns the registered managers sorted by name.
func Registered() []*Manager {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]*Manager, 0, len(registry))
	for _, m := range registry {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// ---------------------------------------------------------------------------
// Set: the evaluated managers of one agent run.

type evaluated struct {
	m       *Manager
	support SupportLevel
}

// Set is the managers that support this machine, best first. Build it once at
// start (IPA evaluates managers once too).
type Set struct {
	managers []evaluated
	log      *slog.Logger
}

// NewSet evaluates ms and keeps those with support > 0, sorted by support
// (desc) then name. Duplicate names: the first one wins, the rest are logged.
func NewSet(ctx context.Context, log *slog.Logger, ms ...*Manager) *Set {
	if log == nil {
		log = slog.Default()
	}
	s := &Set{log: log}
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.Name()] {
			log.Error("hardware manager name used twice; ignoring the second", "manager", m.Name())
			continue
		}
		seen[m.Name()] = true
		lvl := m.Evaluate(ctx)
		log.Info("hardware manager evaluated", "manager", m.Name(), "version", m.Version(), "support", int(lvl))
		if lvl > SupportNone {
			s.managers = append(s.managers, evaluated{m, lvl})
		}
	}
	sort.SliceStable(s.managers, func(i, j int) bool {
		a, b := s.managers[i], s.managers[j]
		if a.support != b.support {
			return a.support > b.support
		}
		return a.m.Name() < b.m.Name()
	})
	return s
}

// Managers returns the supported managers, best first.
func (s *Set) Managers() []*Manager {
	out := make([]*Manager, len(s.managers))
	for i, e := range s.managers {
		out[i] = e.m
	}
	return out
}

// Versions is the hardware_manager_version map.
func (s *Set) Versions() map[string]string {
	v := make(map[string]string, len(s.managers))
	for _, e := range s.managers {
		v[e.m.Name()] = e.m.Version()
	}
	return v
}

// Collect is get_X_steps: every supported manager's steps, deduplicated.
func (s *Set) Collect(kind proto.StepKind) proto.StepsResult {
	cands := make([]Candidate, 0, len(s.managers))
	for _, e := range s.managers {
		cands = append(cands, Candidate{Manager: e.m.Name(), Support: e.support, Steps: e.m.Steps(kind)})
	}
	return proto.StepsResult{Kind: kind, Steps: Merge(cands), HardwareManagerVersion: s.Versions()}
}

// Candidate is one manager's offer for Merge.
type Candidate struct {
	Manager string
	Support SupportLevel
	Steps   []proto.Step
}

// Merge keeps, for each step name, the offer of the manager with the highest
// support, then the highest priority, then the smallest manager name, and
// groups the kept steps by manager. Every candidate manager appears as a key
// (possibly with an empty list), as IPA does.
func Merge(cands []Candidate) map[string][]proto.Step {
	type pick struct {
		c    *Candidate
		step proto.Step
	}
	best := map[string]pick{}
	for i := range cands {
		c := &cands[i]
		for _, st := range c.Steps {
			cur, ok := best[st.Step]
			if !ok || better(c, st, cur.c, cur.step) {
				best[st.Step] = pick{c, st}
			}
		}
	}
	out := make(map[string][]proto.Step, len(cands))
	for _, c := range cands {
		if _, ok := out[c.Manager]; !ok {
			out[c.Manager] = []proto.Step{}
		}
	}
	names := make([]string, 0, len(best))
	for n := range best {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := best[n]
		out[p.c.Manager] = append(out[p.c.Manager], p.step)
	}
	return out
}

func better(a *Candidate, as proto.Step, b *Candidate, bs proto.Step) bool {
	if a.Support != b.Support {
		return a.Support > b.Support
	}
	if as.Priority != bs.Priority {
		return as.Priority > bs.Priority
	}
	return a.Manager < b.Manager
}

// Execute is execute_X_step: check the version map (nil = not checked), then
// try the managers best first until one does not answer
// ErrIncompatibleHardwareMethod.
func (s *Set) Execute(ctx context.Context, call Call, controllerVersion map[string]string) (any, error) {
	if controllerVersion != nil {
		if mine := s.Versions(); !equalMaps(mine, controllerVersion) {
			return nil, &VersionMismatchError{Agent: mine, Controller: controllerVersion}
		}
	}
	if call.Log == nil {
		call.Log = s.log
	}
	name := call.Step.Step.Step
	for _, e := range s.managers {
		res, err := e.m.Execute(ctx, call)
		if errors.Is(err, ErrIncompatibleHardwareMethod) {
			call.Log.Debug("manager cannot run step, trying next", "manager", e.m.Name(), "step", name, "err", err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s step %s (manager %s): %w", call.Kind, name, e.m.Name(), err)
		}
		return res, nil
	}
	return nil, fmt.Errorf("%s step %s: no hardware manager implements it: %w", call.Kind, name, ErrIncompatibleHardwareMethod)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
