package steps

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

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

// fakeManager builds a manager whose clean steps all call *run, counting calls.
func fakeManager(name string, support SupportLevel, run *func(Call) (any, error), calls *int, clean ...proto.Step) *Manager {
	var defs []Def
	for _, s := range clean {
		defs = append(defs, Def{Kind: proto.StepClean, Step: s, Run: func(_ context.Context, c Call) (any, error) {
			*calls++
			return (*run)(c)
		}})
	}
	return MustManager(name, "1."+name, support, defs...)
}

func TestSetCollectAndExecute(t *testing.T) {
	incompatible := func(Call) (any, error) { return nil, ErrIncompatibleHardwareMethod }
	var vendorCalls, genericCalls, noneCalls int
	vendorRun := incompatible
	genericRun := func(c Call) (any, error) { return "generic ran " + c.Step.Step.Step, nil }
	noneRun := func(Call) (any, error) { return "evil ran", nil }
	vendor := fakeManager("vendor", SupportServiceProvider, &vendorRun, &vendorCalls, st("erase_devices", 0))
	generic := fakeManager("generic", SupportGeneric, &genericRun, &genericCalls, st("erase_devices", 10), st("erase_devices_metadata", 99))
	none := fakeManager("none", SupportNone, &noneRun, &noneCalls, st("evil", 100))
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
	if err != nil || out != "generic ran erase_devices" || vendorCalls != 1 || genericCalls != 1 {
		t.Fatalf("execute = %v, %v (vendor calls %d, generic %d)", out, err, vendorCalls, genericCalls)
	}
	// Version mismatch.
	_, err = s.Execute(context.Background(), call, map[string]string{"generic": "0.9"})
	var vm *VersionMismatchError
	if !errors.As(err, &vm) {
		t.Fatalf("want VersionMismatchError, got %v", err)
	}
	// Nobody implements.
	genericRun = incompatible
	_, err = s.Execute(context.Background(), call, nil)
	if !errors.Is(err, ErrIncompatibleHardwareMethod) || !strings.Contains(err.Error(), "no hardware manager") {
		t.Fatalf("want no-manager error, got %v", err)
	}
	// A real failure stops the search.
	genericRun = func(Call) (any, error) { return nil, errors.New("disk on fire") }
	vendorRun = func(Call) (any, error) { return nil, errors.New("vendor failed") }
	_, err = s.Execute(context.Background(), call, nil)
	if err == nil || !strings.Contains(err.Error(), "vendor failed") {
		t.Fatalf("want vendor failure, got %v", err)
	}
}

func TestRegisterDuplicatePanics(t *testing.T) {
	m := MustManager("test_register_dup", "1", SupportGeneric)
	Register(m)
	found := false
	for _, r := range Registered() {
		found = found || r == m
	}
	if !found {
		t.Fatal("registered manager not listed")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate Register did not panic")
		}
	}()
	Register(MustManager("test_register_dup", "2", SupportGeneric))
}

func TestManager(t *testing.T) {
	byKind := func(_ context.Context, c Call) (any, error) { return c.Kind, nil }
	m := MustManager("generic", "1.0", SupportGeneric,
		Def{Kind: proto.StepClean, Step: st("erase_devices_metadata", 99), Run: byKind},
		Def{Kind: proto.StepDeploy, Step: proto.Step{Step: "erase_devices_metadata"}, Run: byKind},
		Def{Kind: proto.StepService, Step: proto.Step{Step: "slow", Abortable: true}, Timeout: time.Millisecond,
			Run: func(ctx context.Context, _ Call) (any, error) { <-ctx.Done(); return nil, ctx.Err() }})
	if got := m.Steps(proto.StepClean); len(got) != 1 || got[0].Priority != 99 {
		t.Fatalf("clean steps %+v", got)
	}
	// The interface defaults to deploy, as Ironic's steps have it.
	if got := m.Steps(proto.StepDeploy); len(got) != 1 || got[0].Priority != 0 || got[0].Interface != "deploy" {
		t.Fatalf("deploy steps %+v", got)
	}
	out, err := m.Execute(context.Background(), Call{Kind: proto.StepDeploy, Step: proto.StepCall{Step: st("erase_devices_metadata", 0)}})
	if err != nil || out != proto.StepDeploy {
		t.Fatal(out, err)
	}
	if _, err := m.Execute(context.Background(), Call{Kind: proto.StepService, Step: proto.StepCall{Step: st("erase_devices_metadata", 0)}}); !errors.Is(err, ErrIncompatibleHardwareMethod) {
		t.Fatalf("want incompatible, got %v", err)
	}
	// The Def's timeout bounds the run (the step sees its context end).
	if _, err := m.Execute(context.Background(), Call{Kind: proto.StepService, Step: proto.StepCall{Step: proto.Step{Step: "slow"}}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
}

func TestNewManagerRejects(t *testing.T) {
	run := func(context.Context, Call) (any, error) { return nil, nil }
	for _, c := range []struct {
		name string
		mgr  string
		defs []Def
		err  string
	}{
		{"ok", "m", []Def{{Kind: proto.StepClean, Step: st("a", 1), Run: run}, {Kind: proto.StepDeploy, Step: st("a", 0), Run: run}}, ""},
		{"no manager name", "", nil, "without a name"},
		{"unknown kind", "m", []Def{{Kind: "reboot", Step: st("a", 0), Run: run}}, "unknown step kind"},
		{"no step name", "m", []Def{{Kind: proto.StepClean, Run: run}}, "no name"},
		{"bad characters", "m", []Def{{Kind: proto.StepClean, Step: st("a/b", 0), Run: run}}, "invalid characters"},
		{"negative timeout", "m", []Def{{Kind: proto.StepClean, Step: st("a", 0), Timeout: -1, Run: run}}, "negative timeout"},
		{"no function", "m", []Def{{Kind: proto.StepClean, Step: st("a", 0)}}, "no function"},
		{"twice in one kind", "m", []Def{{Kind: proto.StepClean, Step: st("a", 0), Run: run}, {Kind: proto.StepClean, Step: st("a", 5), Run: run}}, "declared twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewManager(c.mgr, "1", SupportGeneric, c.defs...)
			if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("NewManager = %v, want %q", err, c.err)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Fatal("MustManager of a bad Def did not panic")
		}
	}()
	MustManager("m", "1", SupportGeneric, Def{Kind: proto.StepClean, Step: st("a", 0)})
}
