package state

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// expectedArrows is spec §1 written out by hand, independently of the table
// in table.go: "from | event | to | target after | context". Context sets
// the node's target before the arrow ("target=X") and "retired". A "-"
// target means null. Every row of transitions must be exercised by a line
// here (TestEveryRowIsTested), so a new row needs a new line.
const expectedArrows = `
enroll          | manage   | verifying       | manageable
verifying       | done     | manageable      | -
verifying       | fail     | enroll          | -
available       | manage   | manageable      | -
manageable      | provide  | cleaning        | available
manageable      | clean    | cleaning        | manageable
cleaning        | done     | available       | -          | target=available
cleaning        | done     | manageable      | -          | target=manageable
cleaning        | done     | manageable      | -          | target=available retired
cleaning        | done     | manageable      | -          | target=manageable retired
cleaning        | wait     | clean wait      | available  | target=available
cleaning        | wait     | clean wait      | manageable | target=manageable
cleaning        | hold     | clean hold      | manageable | target=manageable
cleaning        | fail     | clean failed    | manageable | target=manageable
cleaning        | fail     | clean failed    | available  | target=available
cleaning        | wait     | clean wait      | available
clean wait      | resume   | cleaning        | manageable | target=manageable
clean wait      | hold     | clean hold      | available  | target=available
clean wait      | fail     | clean failed    | available  | target=available
clean wait      | abort    | clean failed    | manageable | target=manageable
clean hold      | unhold   | clean wait      | manageable | target=manageable
clean hold      | abort    | clean failed    | available  | target=available
clean failed    | manage   | manageable      | -          | target=manageable
manageable      | inspect  | inspecting      | manageable
inspecting      | done     | manageable      | -
inspecting      | wait     | inspect wait    | manageable
inspecting      | fail     | inspect failed  | manageable
inspect wait    | resume   | inspecting      | manageable
inspect wait    | done     | manageable      | -
inspect wait    | fail     | inspect failed  | manageable
inspect wait    | abort    | inspect failed  | manageable
inspect failed  | manage   | manageable      | -
inspect failed  | inspect  | inspecting      | manageable
manageable      | adopt    | adopting        | active
adopting        | done     | active          | -
adopting        | fail     | adopt failed    | active
adopt failed    | adopt    | adopting        | active
adopt failed    | manage   | manageable      | -
available       | deploy   | deploying       | active
deploying       | done     | active          | -          | target=active
deploying       | wait     | wait call-back  | active
deploying       | hold     | deploy hold     | active
deploying       | fail     | deploy failed   | active
wait call-back  | resume   | deploying       | active
wait call-back  | hold     | deploy hold     | active
wait call-back  | fail     | deploy failed   | active
wait call-back  | abort    | deploy failed   | active
wait call-back  | delete   | deleting        | available
deploy hold     | unhold   | wait call-back  | active
deploy hold     | abort    | deploy failed   | active
deploy failed   | deploy   | deploying       | active
deploy failed   | rebuild  | deploying       | active
deploy failed   | delete   | deleting        | available
active          | rebuild  | deploying       | active
error           | rebuild  | deploying       | active
active          | delete   | deleting        | available
error           | delete   | deleting        | available
deleting        | clean    | cleaning        | available  | target=available
deleting        | fail     | error           | -
active          | rescue   | rescuing        | rescue
rescuing        | done     | rescue          | -
rescuing        | wait     | rescue wait     | rescue
rescuing        | fail     | rescue failed   | rescue
rescue wait     | resume   | rescuing        | rescue
rescue wait     | fail     | rescue failed   | rescue
rescue wait     | abort    | rescue failed   | rescue
rescue wait     | delete   | deleting        | available
rescue          | rescue   | rescuing        | rescue
rescue          | unrescue | unrescuing      | active
rescue          | delete   | deleting        | available
rescue failed   | rescue   | rescuing        | rescue
rescue failed   | unrescue | unrescuing      | active
rescue failed   | delete   | deleting        | available
unrescuing      | done     | active          | -
unrescuing      | fail     | unrescue failed | active
unrescue failed | rescue   | rescuing        | rescue
unrescue failed | unrescue | unrescuing      | active
unrescue failed | delete   | deleting        | available
active          | service  | servicing       | active
servicing       | done     | active          | -
servicing       | wait     | service wait    | active
servicing       | hold     | service hold    | active
servicing       | fail     | service failed  | active
service wait    | resume   | servicing       | active
service wait    | hold     | service hold    | active
service wait    | fail     | service failed  | active
service wait    | abort    | service failed  | active
service wait    | delete   | deleting        | available
service hold    | unhold   | service wait    | active
service hold    | service  | servicing       | active
service hold    | fail     | service failed  | active
service hold    | abort    | service failed  | active
service failed  | service  | servicing       | active
service failed  | rescue   | rescuing        | rescue
service failed  | delete   | deleting        | available
service failed  | abort    | active          | -
service failed  | wait     | service wait    | active
service failed  | hold     | service hold    | active
`

type arrowCase struct {
	line    int
	from    proto.ProvisionState
	event   Event
	to      proto.ProvisionState
	target  proto.ProvisionState
	before  proto.ProvisionState // target before the arrow
	retired bool
}

func parseArrows(t *testing.T, text string) []arrowCase {
	t.Helper()
	var out []arrowCase
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "|")
		for j := range f {
			f[j] = strings.TrimSpace(f[j])
		}
		if len(f) < 4 || len(f) > 5 {
			t.Fatalf("line %d: want 4 or 5 fields: %q", i, line)
		}
		c := arrowCase{line: i, from: proto.ProvisionState(f[0]), event: Event(f[1]), to: proto.ProvisionState(f[2])}
		if f[3] != "-" {
			c.target = proto.ProvisionState(f[3])
		}
		if len(f) == 5 {
			for _, w := range strings.Fields(f[4]) {
				switch {
				case w == "retired":
					c.retired = true
				case strings.HasPrefix(w, "target="):
					c.before = proto.ProvisionState(strings.TrimPrefix(w, "target="))
				default:
					t.Fatalf("line %d: unknown context %q", i, w)
				}
			}
		} else {
			// A node entering a flow from a stable state has no target; inside a
			// flow it has the flow's target.
			c.before = DefaultTarget(c.from)
		}
		for _, s := range []proto.ProvisionState{c.from, c.to} {
			if !IsState(s) {
				t.Fatalf("line %d: %q is not a state", i, s)
			}
		}
		out = append(out, c)
	}
	return out
}

func TestNextExpectedArrows(t *testing.T) {
	for _, c := range parseArrows(t, expectedArrows) {
		n := Node{State: c.from, Target: c.before, Retired: c.retired}
		got, err := Next(n, c.event)
		if err != nil {
			t.Errorf("line %d: Next(%+v, %s): %v", c.line, n, c.event, err)
			continue
		}
		if got.From != c.from || got.Event != c.event || got.To != c.to || got.Target != c.target {
			t.Errorf("line %d: Next(%+v, %s) = %+v, want to %q target %q", c.line, n, c.event, got, c.to, c.target)
		}
	}
}

// TestEveryRowIsTested fails when a row of the table is not exercised by a
// line of expectedArrows.
func TestEveryRowIsTested(t *testing.T) {
	covered := make([]bool, len(transitions))
	for _, c := range parseArrows(t, expectedArrows) {
		n := Node{State: c.from, Target: c.before, Retired: c.retired}
		for i, r := range transitions {
			if r.matches(n.State, c.event, n.Target, n.Retired) {
				covered[i] = true
				break
			}
		}
	}
	for i, ok := range covered {
		if !ok {
			r := transitions[i]
			t.Errorf("row %d (%s --%s--> %s) has no line in expectedArrows", i, r.from, r.event, r.to)
		}
	}
}

// TestNextRefusesEverythingElse checks the other direction: every (state,
// event) pair not in expectedArrows is refused with InvalidState.
func TestNextRefusesEverythingElse(t *testing.T) {
	allowed := map[[2]string]bool{}
	for _, c := range parseArrows(t, expectedArrows) {
		allowed[[2]string{string(c.from), string(c.event)}] = true
	}
	events := []Event{EvManage, EvProvide, EvInspect, EvAdopt, EvAbort, EvClean, EvDeploy, EvRebuild,
		EvDelete, EvRescue, EvUnrescue, EvUnhold, EvService, EvDone, EvFail, EvWait, EvResume, EvHold, "bogus"}
	for _, s := range append(States(), proto.StateDeleted, proto.StateDeployComplete, proto.NoState, "bogus") {
		for _, ev := range events {
			for _, target := range []proto.ProvisionState{proto.NoState, proto.StateAvailable, proto.StateManageable} {
				_, err := Next(Node{State: s, Target: target}, ev)
				if want := allowed[[2]string{string(s), string(ev)}]; want != (err == nil) {
					t.Errorf("Next(%q target %q, %s): err = %v, want allowed=%v", s, target, ev, err, want)
				}
				if err != nil {
					if e, ok := err.(*Error); !ok || e.Kind != InvalidState {
						t.Errorf("Next(%q, %s): error %v is not an InvalidState *Error", s, ev, err)
					}
				}
			}
		}
	}
}

// TestTargetSemantics checks the rules of target_provision_state on every
// row: null once stable; otherwise the goal of the flow; failed states keep it.
func TestTargetSemantics(t *testing.T) {
	for _, r := range transitions {
		// A node has its flow's default target, except that clean* states also
		// serve manual cleaning (target manageable).
		befores := []proto.ProvisionState{DefaultTarget(r.from)}
		if r.target == tKeep || r.when != always {
			befores = append(befores, proto.StateManageable)
		}
		for _, before := range befores {
			if !r.matches(r.from, r.event, before, false) {
				continue
			}
			got := r.transition(Node{State: r.from, Target: before})
			switch {
			case IsStable(r.to):
				if got.Target != proto.NoState {
					t.Errorf("%s --%s--> %s: target %q, want null once stable", r.from, r.event, r.to, got.Target)
				}
			default:
				if !IsStable(got.Target) {
					t.Errorf("%s --%s--> %s: target %q is not a stable state", r.from, r.event, r.to, got.Target)
				}
			}
			if IsFailed(r.to) && IsTransient(r.from) && before != proto.NoState && got.Target != before {
				t.Errorf("%s --%s--> %s: failed state target %q, want the flow's %q kept", r.from, r.event, r.to, got.Target, before)
			}
		}
	}
}

func TestTableIsConsistent(t *testing.T) {
	type key struct {
		from  proto.ProvisionState
		event Event
		when  cond
	}
	seen := map[key]bool{}
	for i, r := range transitions {
		if !IsState(r.from) || !IsState(r.to) {
			t.Errorf("row %d: %q → %q uses a non-state", i, r.from, r.to)
		}
		k := key{r.from, r.event, r.when}
		if seen[k] {
			t.Errorf("row %d: duplicate (%s, %s)", i, r.from, r.event)
		}
		seen[k] = true
		if r.target == tManageable && !IsStable(proto.ProvisionState(r.target)) {
			t.Errorf("row %d: explicit target not stable", i)
		}
	}
	// Every state is reachable and (except enroll) has an arrow in.
	in := map[proto.ProvisionState]bool{}
	out := map[proto.ProvisionState]bool{}
	for _, r := range transitions {
		in[r.to] = true
		out[r.from] = true
	}
	for _, s := range States() {
		if s != proto.StateEnroll && !in[s] {
			t.Errorf("state %q has no arrow in", s)
		}
		if !out[s] {
			t.Errorf("state %q has no arrow out", s)
		}
	}
	if a := Arrows(); len(a) != len(transitions) {
		t.Errorf("Arrows() has %d rows, want %d", len(a), len(transitions))
	}
}

// TestKinds lists every state with its kind and default target, written
// independently from stateTable.
func TestKinds(t *testing.T) {
	want := map[proto.ProvisionState]struct {
		kind   Kind
		target proto.ProvisionState
	}{
		"enroll": {Stable, ""}, "manageable": {Stable, ""}, "available": {Stable, ""},
		"active": {Stable, ""}, "error": {Stable, ""}, "rescue": {Stable, ""},
		"verifying": {Transient, "manageable"}, "inspecting": {Transient, "manageable"},
		"inspect wait": {Transient, "manageable"}, "cleaning": {Transient, "available"},
		"clean wait": {Transient, "available"}, "clean hold": {Transient, "available"},
		"deploying": {Transient, "active"}, "wait call-back": {Transient, "active"},
		"deploy hold": {Transient, "active"}, "deleting": {Transient, "available"},
		"adopting": {Transient, "active"}, "rescuing": {Transient, "rescue"},
		"rescue wait": {Transient, "rescue"}, "unrescuing": {Transient, "active"},
		"servicing": {Transient, "active"}, "service wait": {Transient, "active"},
		"service hold":   {Transient, "active"},
		"inspect failed": {Failed, "manageable"}, "clean failed": {Failed, "available"},
		"deploy failed": {Failed, "active"}, "adopt failed": {Failed, "active"},
		"rescue failed": {Failed, "rescue"}, "unrescue failed": {Failed, "active"},
		"service failed": {Failed, "active"},
		"deleted":        {TargetOnly, ""}, "deploy complete": {TargetOnly, ""},
	}
	if len(want) != len(stateTable) {
		t.Errorf("state table has %d states, test knows %d", len(stateTable), len(want))
	}
	for s, w := range want {
		if got := KindOf(s); got != w.kind {
			t.Errorf("KindOf(%q) = %v, want %v", s, got, w.kind)
		}
		if got := DefaultTarget(s); got != w.target {
			t.Errorf("DefaultTarget(%q) = %q, want %q", s, got, w.target)
		}
		if IsStable(s) != (w.kind == Stable) || IsTransient(s) != (w.kind == Transient) || IsFailed(s) != (w.kind == Failed) {
			t.Errorf("Is* of %q disagree with kind %v", s, w.kind)
		}
		if IsState(s) == (w.kind == TargetOnly) {
			t.Errorf("IsState(%q) = %v", s, IsState(s))
		}
	}
	for _, s := range []proto.ProvisionState{proto.NoState, "bogus", "deploy"} {
		if KindOf(s) != KindUnknown || IsState(s) {
			t.Errorf("%q should be unknown", s)
		}
	}
	if n := len(States()); n != 30 {
		t.Errorf("States() has %d states, want 30", n)
	}
}
