package steps

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// Func runs one step.
type Func func(ctx context.Context, call Call) (any, error)

// Def declares one step of one kind. It is the one way a step enters the
// agent: the generic manager's built-in steps, registered managers and
// executable plugins are all lists of Defs, so get_X_steps reports exactly
// what execute_X_step dispatches. A step offered for several kinds (with
// different priorities, say) is one Def per kind.
type Def struct {
	Kind proto.StepKind
	// Step is what get_X_steps reports: name, interface (default "deploy"),
	// priority, argsinfo, reboot_requested, abortable.
	proto.Step
	// Timeout bounds one run (its context is cancelled); 0 means none.
	Timeout time.Duration
	// Run executes the step.
	Run Func
}

// validate checks what a controller relies on: a known kind, a name it can
// send back, a function to call.
func (d Def) validate() error {
	if err := d.validateDecl(); err != nil {
		return err
	}
	if d.Run == nil {
		return fmt.Errorf("%s step %q: no function", d.Kind, d.Step.Step)
	}
	return nil
}

// validateDecl checks the declared part, what a plugin's describe gives.
func (d Def) validateDecl() error {
	switch d.Kind {
	case proto.StepClean, proto.StepDeploy, proto.StepService:
	default:
		return fmt.Errorf("unknown step kind %q (want clean, deploy or service)", d.Kind)
	}
	if d.Step.Step == "" {
		return fmt.Errorf("%s step has no name", d.Kind)
	}
	if strings.ContainsAny(d.Step.Step, "/ \t\n") {
		return fmt.Errorf("%s step name %q has invalid characters", d.Kind, d.Step.Step)
	}
	if d.Timeout < 0 {
		return fmt.Errorf("%s step %q: negative timeout", d.Kind, d.Step.Step)
	}
	return nil
}

// Manager is a hardware manager: a name (the key in X_steps and
// hardware_manager_version), a version (changed whenever the steps change:
// the controller sends the map back with execute calls and a mismatch forces
// a re-fetch), a support level and its steps. It is immutable once built.
type Manager struct {
	name, version string
	support       SupportLevel
	defs          map[proto.StepKind][]Def
}

// NewManager checks defs (see Def) and builds a manager. A step name given
// twice for one kind is an error: the controller could not tell them apart.
func NewManager(name, version string, support SupportLevel, defs ...Def) (*Manager, error) {
	if name == "" {
		return nil, fmt.Errorf("hardware manager without a name")
	}
	m := &Manager{name: name, version: version, support: support, defs: map[proto.StepKind][]Def{}}
	seen := map[string]bool{}
	for _, d := range defs {
		if err := d.validate(); err != nil {
			return nil, fmt.Errorf("manager %s: %w", name, err)
		}
		key := string(d.Kind) + "." + d.Step.Step
		if seen[key] {
			return nil, fmt.Errorf("manager %s: %s step %q declared twice", name, d.Kind, d.Step.Step)
		}
		seen[key] = true
		if d.Interface == "" {
			d.Interface = "deploy"
		}
		m.defs[d.Kind] = append(m.defs[d.Kind], d)
	}
	return m, nil
}

// MustManager is NewManager for steps fixed in the code (init, main): a bad
// Def is a wiring bug and panics.
func MustManager(name, version string, support SupportLevel, defs ...Def) *Manager {
	m, err := NewManager(name, version, support, defs...)
	if err != nil {
		panic("steps: " + err.Error())
	}
	return m
}

func (m *Manager) Name() string    { return m.name }
func (m *Manager) Version() string { return m.version }

// Evaluate says how well the manager supports this machine (IPA's
// evaluate_hardware_support): the level given at construction.
func (m *Manager) Evaluate(context.Context) SupportLevel { return m.support }

// Steps lists the steps of kind, in declaration order.
func (m *Manager) Steps(kind proto.StepKind) []proto.Step {
	out := make([]proto.Step, 0, len(m.defs[kind]))
	for _, d := range m.defs[kind] {
		out = append(out, d.Step)
	}
	return out
}

// Def returns the declaration of the kind step called name.
func (m *Manager) Def(kind proto.StepKind, name string) (Def, bool) {
	for _, d := range m.defs[kind] {
		if d.Step.Step == name {
			return d, true
		}
	}
	return Def{}, false
}

// Execute runs one step under its timeout. A step the manager does not
// declare answers ErrIncompatibleHardwareMethod so the next manager is tried;
// a step's Run may answer it too (it cannot run on this hardware).
func (m *Manager) Execute(ctx context.Context, call Call) (any, error) {
	d, ok := m.Def(call.Kind, call.Step.Step.Step)
	if !ok {
		return nil, fmt.Errorf("%s has no %s step %q: %w", m.name, call.Kind, call.Step.Step.Step, ErrIncompatibleHardwareMethod)
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	return d.Run(ctx, call)
}
