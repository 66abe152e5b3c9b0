package decide

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// The decision tables of each flow are in <flow>_test.go. This file holds
// what they share: a node in a given state, the input around it, and the
// means to read a decision — its actions as short words, and the node after
// its updates.

const nodeID = "1be26c0b-03f2-4d2e-ae87-c02d7bcb7f3b"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var testConfig = Config{APIURL: "http://kiln:6385", CallbackTimeout: 30 * time.Minute, AgentHeartbeatTimeout: time.Minute}

// node is a node in provision state ps aiming at target (NoState: none).
func node(ps, target proto.ProvisionState) *proto.Node {
	n := &proto.Node{UUID: nodeID, Driver: "fake-hardware", ProvisionState: ps,
		Properties: proto.Dict{}, InstanceInfo: proto.Dict{}, DriverInfo: proto.Dict{}, DriverInternalInfo: proto.Dict{},
		ProvisionUpdatedAt: &proto.Time{Time: t0.Add(-time.Minute)}}
	if target != proto.NoState {
		n.TargetProvisionState = &target
	}
	off := proto.PowerOff
	n.PowerState = &off
	return n
}

// input is the decision's input for n with flow state s and deploy
// interface deployIface, at t0.
func input(t *testing.T, n *proto.Node, s flowstate.State, deployIface string) Input {
	t.Helper()
	d, err := driver.LookupDeploy(deployIface)
	if err != nil {
		t.Fatal(err)
	}
	return Input{Node: n, State: s, Deploy: d, Now: t0, Config: testConfig}
}

// withAgent is a flow state with a running agent.
func withAgent(s flowstate.State) flowstate.State {
	s.Agent = flowstate.Agent{URL: "http://192.0.2.10:9999", Token: "tok", LastHeartbeat: t0.Add(-10 * time.Second)}
	return s
}

// words tells a decision's actions in short: I/O by name, updates by the
// arrow they take (updates without one are left out, their effect is
// checked on the node after; so are wakes, checked in waits_test.go).
func words(acts []Action) []string {
	var out []string
	for _, a := range acts {
		var w string
		switch a := a.(type) {
		case Update:
			if a.Move == "" {
				continue
			}
			w = "move " + string(a.Move)
		case Wake:
			continue // see waits_test.go
		case History:
			w = "history " + a.Severity
		case SetPower:
			w = string(a.Target)
		case SetBootDevice:
			w = "boot device " + a.Device
		case PrepareRamdisk:
			w = "prepare ramdisk"
		case CleanUpRamdisk:
			w = "clean up ramdisk"
		case PrepareInstance:
			w = "prepare instance"
		case Validate:
			w = "validate " + a.Interface
		case ReadPower:
			w = "read power"
		case Inspect:
			w = "inspect"
		case ReadInventory:
			w = "read inventory"
		case CreatePorts:
			w = "create ports " + strings.Join(a.MACs, ",")
		case FakeDeploy:
			w = "fake deploy"
		case AgentGetSteps:
			w = "agent get " + string(a.Kind) + " steps"
			if a.Refresh {
				w += " again"
			}
		case BuildImageArgs:
			w = "build image args"
		case AgentCommands:
			w = "agent commands"
		case AgentExecute:
			w = "agent execute " + stepLabel(a.Step)
		case AgentPowerOff:
			w = "agent power off"
		case AgentPartitionUUIDs:
			w = "agent partition uuids"
		case AgentFinalizeRescue:
			w = "agent finalize rescue"
		case AgentInstallBootloader:
			w = "agent install bootloader"
		case DriverStep:
			w = "driver step " + stepLabel(a.Step)
		case ManagementCall:
			w = "management " + a.Request.Op
		case SetSecureBoot:
			w = fmt.Sprintf("secure boot %v", a.On)
		case RefreshHardware:
			w = "refresh hardware"
		default:
			w = fmt.Sprintf("%T", a)
		}
		out = append(out, w)
	}
	return out
}

// after is the node once every update of acts is applied, as the executor
// would apply them had every action succeeded; its flow state with it.
func after(t *testing.T, in Input, acts []Action) (*proto.Node, flowstate.State) {
	t.Helper()
	n := *in.Node
	n.DriverInternalInfo = maps.Clone(in.Node.DriverInternalInfo)
	n.InstanceInfo = maps.Clone(in.Node.InstanceInfo)
	n.Properties = maps.Clone(in.Node.Properties)
	flowstate.Write(&n, in.State, flowstate.All)
	for _, a := range acts {
		if u, ok := a.(Update); ok {
			if err := Apply(&n, u, in.Now); err != nil && !u.Force {
				t.Fatalf("update %+v refused: %v", u, err)
			}
		}
	}
	s, err := flowstate.Of(&n)
	if err != nil {
		t.Fatal(err)
	}
	return &n, s
}

// want checks a decision's actions word for word.
func want(t *testing.T, acts []Action, w ...string) {
	t.Helper()
	if got := words(acts); !slices.Equal(got, w) {
		t.Errorf("actions\n got %q\nwant %q", got, w)
	}
}

// wantState checks where the node ends and its last_error (a substring;
// "" for none).
func wantState(t *testing.T, n *proto.Node, ps proto.ProvisionState, lastError string) {
	t.Helper()
	if n.ProvisionState != ps {
		t.Errorf("provision state %q, want %q", n.ProvisionState, ps)
	}
	switch {
	case lastError == "" && n.LastError != nil && *n.LastError != "":
		t.Errorf("last_error %q, want none", *n.LastError)
	case lastError != "" && (n.LastError == nil || !strings.Contains(*n.LastError, lastError)):
		t.Errorf("last_error %v, want it to contain %q", deref(n.LastError), lastError)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// find returns the first action of type T in acts.
func find[T Action](t *testing.T, acts []Action) T {
	t.Helper()
	for _, a := range acts {
		if x, ok := a.(T); ok {
			return x
		}
	}
	var zero T
	t.Fatalf("no %T among %q", zero, words(acts))
	return zero
}

// failedAt is the event of action a (the first of type T) failing.
func failedAt[T Action](t *testing.T, acts []Action, msg string) ActionFailed {
	t.Helper()
	return ActionFailed{Action: find[T](t, acts), Err: errors.New(msg)}
}

// request is the flow state holding a provision request.
func request(verb proto.Verb, from proto.ProvisionState) flowstate.State {
	return flowstate.State{Request: &flowstate.Request{Verb: string(verb), From: from}}
}

// requested is the node as the API leaves it after accepting verb in state
// from (target as given), with the request recorded.
func requested(t *testing.T, from, target proto.ProvisionState, verb proto.Verb) (*proto.Node, flowstate.State) {
	t.Helper()
	n := node(from, target)
	sn := state.Node{State: from}
	if target != proto.NoState {
		sn.Target = target
	}
	tr, err := state.Request(sn, verb, 200)
	if err != nil {
		t.Fatalf("%s from %s: %v", verb, from, err)
	}
	n.ProvisionState, n.TargetProvisionState = tr.To, nil
	if tr.Target != proto.NoState {
		tt := tr.Target
		n.TargetProvisionState = &tt
	}
	return n, request(verb, from)
}
