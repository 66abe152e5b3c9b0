package allocation

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func sp(s string) *string { return &s }

// node builds a node for the tables: available, class "gold", free.
func node(id string, opts ...func(*proto.Node)) *proto.Node {
	n := &proto.Node{UUID: id, ProvisionState: proto.StateAvailable, ResourceClass: sp("gold"), Traits: []string{}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withTraits(ts ...string) func(*proto.Node) { return func(n *proto.Node) { n.Traits = ts } }
func withClass(c string) func(*proto.Node)      { return func(n *proto.Node) { n.ResourceClass = sp(c) } }
func withOwner(o string) func(*proto.Node)      { return func(n *proto.Node) { n.Owner = sp(o) } }
func withLessee(o string) func(*proto.Node)     { return func(n *proto.Node) { n.Lessee = sp(o) } }
func withName(s string) func(*proto.Node)       { return func(n *proto.Node) { n.Name = sp(s) } }
func inMaintenance(n *proto.Node)               { n.Maintenance = true }
func withState(s proto.ProvisionState) func(*proto.Node) {
	return func(n *proto.Node) { n.ProvisionState = s }
}
func withInstance(n *proto.Node)   { n.InstanceUUID = sp("inst") }
func withAllocation(n *proto.Node) { n.AllocationUUID = sp("other") }

// noShuffle keeps the listed order, so the tables can name the result.
func noShuffle(int, func(i, j int)) {}

// reverse is a shuffle that is not the identity.
func reverse(n int, swap func(i, j int)) {
	for i := 0; i < n/2; i++ {
		swap(i, n-1-i)
	}
}

// TestCandidates: candidates × traits × resource class × owner ×
// maintenance and state, and Ironic's messages when nothing matches.
func TestCandidates(t *testing.T) {
	fleet := []*proto.Node{
		node("n1", withTraits("CUSTOM_GPU", "HW_CPU_X86_AVX2"), withOwner("p1")),
		node("n2", withTraits("CUSTOM_GPU")),
		node("n3", withClass("silver"), withTraits("CUSTOM_GPU")),
		node("n4", inMaintenance, withTraits("CUSTOM_GPU")),
		node("n5", withState(proto.StateManageable), withTraits("CUSTOM_GPU")),
		node("n6", withInstance),
		node("n7", withAllocation),
		node("n8", withLessee("p1")),
		node("n9", withState(proto.StateActive)),
	}
	for _, tc := range []struct {
		name string
		req  Request
		want []string
		err  string
	}{
		{"class only", Request{ResourceClass: "gold"}, []string{"n1", "n2", "n8"}, ""},
		{"other class", Request{ResourceClass: "silver"}, []string{"n3"}, ""},
		{"unknown class", Request{ResourceClass: "bronze"}, nil, "no available nodes match the resource class bronze"},
		{"one trait", Request{ResourceClass: "gold", Traits: []string{"CUSTOM_GPU"}}, []string{"n1", "n2"}, ""},
		{"all traits", Request{ResourceClass: "gold", Traits: []string{"CUSTOM_GPU", "HW_CPU_X86_AVX2"}}, []string{"n1"}, ""},
		{"missing trait", Request{ResourceClass: "gold", Traits: []string{"CUSTOM_FPGA"}}, nil, "no suitable nodes have the requested traits CUSTOM_FPGA"},
		{"maintenance and state and class excluded despite traits", Request{ResourceClass: "silver", Traits: []string{"CUSTOM_GPU"}}, []string{"n3"}, ""},
		{"candidates", Request{ResourceClass: "gold", CandidateNodes: []string{"n2", "n8"}}, []string{"n2", "n8"}, ""},
		{"candidates filtered by traits", Request{ResourceClass: "gold", CandidateNodes: []string{"n2", "n8"}, Traits: []string{"CUSTOM_GPU"}}, []string{"n2"}, ""},
		{"candidates none usable", Request{ResourceClass: "gold", CandidateNodes: []string{"n4", "n5", "n6", "n7"}}, nil,
			"none of the requested nodes are available and match the resource class gold"},
		{"candidates of another class", Request{ResourceClass: "gold", CandidateNodes: []string{"n3"}}, nil,
			"none of the requested nodes are available and match the resource class gold"},
		{"owner matches owner or lessee", Request{ResourceClass: "gold", Owner: "p1"}, []string{"n1", "n8"}, ""},
		{"owner and traits", Request{ResourceClass: "gold", Owner: "p1", Traits: []string{"CUSTOM_GPU"}}, []string{"n1"}, ""},
		{"unknown owner", Request{ResourceClass: "gold", Owner: "p9"}, nil, "no available nodes match the resource class gold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Candidates(fleet, tc.req, noShuffle)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, n := range got {
				ids = append(ids, n.UUID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("candidates %v, want %v", ids, tc.want)
			}
		})
	}
}

// TestCandidatesOrder: the shuffle decides the order, then a node named
// like the allocation goes first.
func TestCandidatesOrder(t *testing.T) {
	fleet := []*proto.Node{node("a"), node("b", withName("web-1")), node("c"), node("d")}
	ids := func(ns []*proto.Node) string {
		var s []string
		for _, n := range ns {
			s = append(s, n.UUID)
		}
		return strings.Join(s, ",")
	}
	got, _ := Candidates(fleet, Request{ResourceClass: "gold"}, reverse)
	if ids(got) != "d,c,b,a" {
		t.Errorf("shuffled: %s", ids(got))
	}
	got, _ = Candidates(fleet, Request{ResourceClass: "gold", Name: "web-1"}, reverse)
	if ids(got) != "b,d,c,a" {
		t.Errorf("named first: %s", ids(got))
	}
	if ids(fleet) != "a,b,c,d" {
		t.Errorf("the caller's list was reordered: %s", ids(fleet))
	}
}

func TestClaim(t *testing.T) {
	r := Request{UUID: "alloc-1", ResourceClass: "gold", Traits: []string{"CUSTOM_GPU"}}
	n := node("n1", withTraits("CUSTOM_GPU"))
	if err := Claim(n, r); err != nil {
		t.Fatal(err)
	}
	if *n.AllocationUUID != "alloc-1" || *n.InstanceUUID != "alloc-1" {
		t.Errorf("claimed node: allocation %v instance %v", n.AllocationUUID, n.InstanceUUID)
	}
	if ts, _ := n.InstanceInfo["traits"].([]any); len(ts) != 1 || ts[0] != "CUSTOM_GPU" {
		t.Errorf("instance_info.traits = %v", n.InstanceInfo["traits"])
	}
	// A second claim of the same node, by this or another allocation, fails.
	if err := Claim(n, Request{UUID: "alloc-2", ResourceClass: "gold"}); !errors.Is(err, ErrUnsuitable) {
		t.Errorf("second claim: %v, want ErrUnsuitable", err)
	}
	busy := node("n2")
	busy.Reservation = sp("conductor-1")
	if err := Claim(busy, r); !errors.Is(err, ErrReserved) {
		t.Errorf("claim of a reserved node: %v, want ErrReserved", err)
	}
	for _, n := range []*proto.Node{node("x", inMaintenance), node("x", withClass("silver")), node("x"), node("x", withState(proto.StateEnroll))} {
		if err := Claim(n, r); !errors.Is(err, ErrUnsuitable) || n.AllocationUUID != nil {
			t.Errorf("claim of %+v: %v", n, err)
		}
	}
}

func TestBackfill(t *testing.T) {
	active := func(opts ...func(*proto.Node)) *proto.Node {
		return node("n1", append([]func(*proto.Node){withState(proto.StateActive)}, opts...)...)
	}
	r := Request{UUID: "a1", ResourceClass: "gold"}
	for _, tc := range []struct {
		name string
		n    *proto.Node
		r    Request
		err  string
	}{
		{"active node", active(), r, ""},
		{"its own instance", active(func(n *proto.Node) { n.InstanceUUID = sp("a1") }), r, ""},
		{"no class asked", active(), Request{UUID: "a1"}, ""},
		{"available", node("n1"), r, `Cannot backfill an allocation for node n1: Node must be in the "active" state, but the current state is "available"`},
		{"class and traits", active(withClass("silver")), Request{UUID: "a1", ResourceClass: "gold", Traits: []string{"CUSTOM_A"}},
			"Cannot backfill an allocation for node n1: Resource class silver does not match the requested resource class gold; List of traits [] does not match the requested traits [CUSTOM_A]"},
		{"not a candidate", active(), Request{UUID: "a1", CandidateNodes: []string{"n2"}},
			"Cannot backfill an allocation for node n1: Candidate nodes must be empty or contain the target node, but got [n2]"},
		{"another instance", active(withInstance), r, "Node n1 is associated with instance inst."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Backfill(tc.n, tc.r)
			if tc.err == "" {
				if err != nil || *tc.n.AllocationUUID != "a1" {
					t.Fatalf("Backfill: %v, node allocation %v", err, tc.n.AllocationUUID)
				}
				return
			}
			if err == nil || err.Error() != tc.err {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if tc.n.AllocationUUID != nil {
				t.Error("a refused backfill changed the node")
			}
		})
	}
}

func TestCheckReleaseAndRelease(t *testing.T) {
	deploying := proto.StateActive
	for _, tc := range []struct {
		name string
		n    *proto.Node
		ok   bool
	}{
		{"available", node("n1"), true},
		{"active", node("n1", withState(proto.StateActive)), false},
		{"active in maintenance", node("n1", withState(proto.StateActive), inMaintenance), true},
		{"deploying", node("n1", withState(proto.StateDeploying), func(n *proto.Node) { n.TargetProvisionState = &deploying }), false},
		{"deploy failed", node("n1", withState(proto.StateDeployFailed), func(n *proto.Node) { n.TargetProvisionState = &deploying }), true},
	} {
		if err := CheckRelease(tc.n, "a1"); (err == nil) != tc.ok {
			t.Errorf("%s: CheckRelease = %v", tc.name, err)
		}
	}
	n := node("n1")
	if err := Claim(n, Request{UUID: "a1", ResourceClass: "gold"}); err != nil {
		t.Fatal(err)
	}
	if Release(n, "a2") || n.AllocationUUID == nil {
		t.Error("released by another allocation")
	}
	if !Release(n, "a1") || n.AllocationUUID != nil || n.InstanceUUID != nil {
		t.Errorf("Release left %v %v", n.AllocationUUID, n.InstanceUUID)
	}
}

func TestEndByInstanceRemoval(t *testing.T) {
	held := func(opts ...func(*proto.Node)) *proto.Node {
		n := node("n1", opts...)
		n.AllocationUUID, n.InstanceUUID = sp("a1"), sp("a1")
		return n
	}
	removed := func(n *proto.Node) *proto.Node { u := *n; u.InstanceUUID = nil; return &u }
	for _, tc := range []struct {
		name    string
		old     *proto.Node
		updated func(*proto.Node) *proto.Node
		ended   string
		err     bool
	}{
		{"available", held(), removed, "a1", false},
		{"manageable", held(withState(proto.StateManageable)), removed, "a1", false},
		{"active", held(withState(proto.StateActive)), removed, "", true},
		{"active in maintenance", held(withState(proto.StateActive), inMaintenance), removed, "a1", false},
		{"instance kept", held(withState(proto.StateActive)), func(n *proto.Node) *proto.Node { u := *n; return &u }, "", false},
		{"no allocation", node("n1", withInstance), removed, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := tc.updated(tc.old)
			ended, err := EndByInstanceRemoval(tc.old, up)
			if (err != nil) != tc.err || ended != tc.ended {
				t.Fatalf("EndByInstanceRemoval = %q, %v", ended, err)
			}
			if ended != "" && up.AllocationUUID != nil {
				t.Error("allocation_uuid kept on the updated node")
			}
			if tc.err && !strings.Contains(err.Error(), "allowed (enroll, inspecting, inspect wait, manageable, available) states") {
				t.Errorf("message %q", err)
			}
		})
	}
}
