package steps

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func st(name string, prio int) proto.Step {
	return proto.Step{Step: name, Priority: prio, Interface: "deploy"}
}

func TestMerge(t *testing.T) {
	for _, c := range []struct {
		name  string
		cands []Candidate
		want  map[string][]proto.Step
	}{
		{"empty", nil, map[string][]proto.Step{}},
		{"higher support wins over priority",
			[]Candidate{{"generic", SupportGeneric, []proto.Step{st("erase_devices", 10)}},
				{"vendor", SupportServiceProvider, []proto.Step{st("erase_devices", 0)}}},
			map[string][]proto.Step{"generic": {}, "vendor": {st("erase_devices", 0)}}},
		{"same support: higher priority wins",
			[]Candidate{{"a", SupportMainline, []proto.Step{st("x", 5)}},
				{"b", SupportMainline, []proto.Step{st("x", 50)}}},
			map[string][]proto.Step{"a": {}, "b": {st("x", 50)}}},
		{"full tie: smaller manager name wins",
			[]Candidate{{"zeta", SupportMainline, []proto.Step{st("x", 5)}},
				{"alpha", SupportMainline, []proto.Step{st("x", 5)}}},
			map[string][]proto.Step{"zeta": {}, "alpha": {st("x", 5)}}},
		{"distinct steps kept, sorted by name",
			[]Candidate{{"g", SupportGeneric, []proto.Step{st("b", 1), st("a", 2)}},
				{"v", SupportMainline, []proto.Step{st("c", 0)}}},
			map[string][]proto.Step{"g": {st("a", 2), st("b", 1)}, "v": {st("c", 0)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Merge(c.cands); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Merge = %v, want %v", got, c.want)
			}
		})
	}
}

// fakeManager is a test manager that records calls.
type fakeManager struct {
	name    string
	support SupportLevel
	steps   map[proto.StepKind][]proto.Step
	run     func(Call) (any, error)
	calls   int
}

func (f *fakeManager) Name() string                          { return f.name }
func (f *fakeManager) Version() string                       { return "1." + f.name }
func (f *fakeManager) Evaluate(context.Context) SupportLevel { return f.support }
func (f *fakeManager) Steps(k proto.StepKind) []proto.Step   { return f.steps[k] }
func (f *fakeManager) Execute(_ context.Context, c Call) (any, error) {
	f.calls++
	return f.run(c)
}

func TestSetCollectAndExecute(t *testing.T) {
	incompatible := func(Call) (any, error) { return nil, ErrIncompatibleHardwareMethod }
	vendor := &fakeManager{name: "vendor", support: SupportServiceProvider,
		steps: map[proto.StepKind][]proto.Step{proto.StepClean: {st("erase_devices", 0)}}, run: incompatible}
	generic := &fakeManager{name: "generic", support: SupportGeneric,
		steps: map[proto.StepKind][]proto.Step{proto.StepClean: {st("erase_devices", 10), st("erase_devices_metadata", 99)}},
		run:   func(c Call) (any, error) { return "generic ran " + c.Step.Step.Step, nil }}
	none := &fakeManager{name: "none", support: SupportNone,
		steps: map[proto.StepKind][]proto.Step{proto.StepClean: {st("evil", 100)}}}
	s := NewSet(context.Background(), nil, generic, none, vendor)

	if got := s.Managers(); len(got) != 2 || got[0].Name() != "vendor" || got[1].Name() != "generic" {
		t.Fatalf("managers order: %v", got)
	}
	res := s.Collect(proto.StepClean)
	want := map[string][]proto.Step{"vendor": {st("erase_devices", 0)}, "generic": {st("erase_devices_metadata", 99)}}
	if !reflect.DeepEqual(res.Steps, want) || res.Kind != proto.StepClean {
		t.Fatalf("collect = %+v", res)
	}
	if !reflect.DeepEqual(res.HardwareManagerVersion, map[string]string{"vendor": "1.vendor", "generic": "1.generic"}) {
		t.Fatalf("versions = %v", res.HardwareManagerVersion)
	}

	call := Call{Kind: proto.StepClean, Step: proto.StepCall{Step: st("erase_devices", 0)}}
	// IncompatibleHardwareMethod from vendor → generic runs it.
	out, err := s.Execute(context.Background(), call, s.Versions())
	if err != nil || out != "generic ran erase_devices" || vendor.calls != 1 {
		t.Fatalf("execute = %v, %v (vendor calls %d)", out, err, vendor.calls)
	}
	// Version mismatch.
	_, err = s.Execute(context.Background(), call, map[string]string{"generic": "0.9"})
	var vm *VersionMismatchError
	if !errors.As(err, &vm) {
		t.Fatalf("want VersionMismatchError, got %v", err)
	}
	// Nobody implements.
	generic.run = incompatible
	_, err = s.Execute(context.Background(), call, nil)
	if !errors.Is(err, ErrIncompatibleHardwareMethod) || !strings.Contains(err.Error(), "no hardware manager") {
		t.Fatalf("want no-manager error, got %v", err)
	}
	// A real failure stops the search.
	generic.run = func(Call) (any, error) { return nil, errors.New("disk on fire") }
	vendor.run = func(Call) (any, error) { return nil, errors.New("vendor failed") }
	_, err = s.Execute(context.Background(), call, nil)
	if err == nil || !strings.Contains(err.Error(), "vendor failed") {
		t.Fatalf("want vendor failure, got %v", err)
	}
}

func TestRegisterDuplicatePanics(t *testing.T) {
	m := NewFuncManager("test_register_dup", "1", SupportGeneric)
	Register(m)
	found := false
	for _, r := range Registered() {
		found = found || r == Manager(m)
	}
	if !found {
		t.Fatal("registered manager not listed")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate Register did not panic")
		}
	}()
	Register(NewFuncManager("test_register_dup", "2", SupportGeneric))
}

func TestFuncManager(t *testing.T) {
	m := NewFuncManager("generic", "1.0", SupportGeneric)
	m.Add(st("erase_devices_metadata", 99), func(_ context.Context, c Call) (any, error) {
		return c.Kind, nil
	}, proto.StepClean, proto.StepDeploy)
	if len(m.Steps(proto.StepDeploy)) != 1 || len(m.Steps(proto.StepService)) != 0 {
		t.Fatal("steps by kind wrong")
	}
	out, err := m.Execute(context.Background(), Call{Kind: proto.StepDeploy, Step: proto.StepCall{Step: st("erase_devices_metadata", 0)}})
	if err != nil || out != proto.StepDeploy {
		t.Fatal(out, err)
	}
	if _, err := m.Execute(context.Background(), Call{Kind: proto.StepService, Step: proto.StepCall{Step: st("erase_devices_metadata", 0)}}); !errors.Is(err, ErrIncompatibleHardwareMethod) {
		t.Fatalf("want incompatible, got %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate Add did not panic")
		}
	}()
	m.Add(st("erase_devices_metadata", 1), nil, proto.StepClean)
}
