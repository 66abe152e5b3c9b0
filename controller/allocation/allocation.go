// Package allocation decides which node an Ironic allocation gets, without
// a store, a clock or randomness of its own: which nodes are candidates
// (available, not in maintenance, free, of the resource class, with every
// requested trait, among the candidate nodes, of the owner), in what order
// to try them, what claiming a node changes on it, and when an allocation
// may let go of its node. The conductor feeds it nodes and writes what it
// returns (controller/conductor/allocations.go); the API uses it for
// backfilling and deleting.
package allocation

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/controller/traits"
	"github.com/kilnhq/kiln/proto"
)

// Request is what an allocation asks of a node.
type Request struct {
	UUID, Name    string
	ResourceClass string
	Traits        []string
	// CandidateNodes are node UUIDs; empty means any node.
	CandidateNodes []string
	// Owner, when set, must be the node's owner or lessee.
	Owner string
}

// RequestOf reads a stored allocation's request.
func RequestOf(a *proto.Allocation) Request {
	return Request{UUID: a.UUID, Name: deref(a.Name), ResourceClass: deref(a.ResourceClass), Traits: a.Traits,
		CandidateNodes: a.CandidateNodes, Owner: deref(a.Owner)}
}

// Unsuitable says why n cannot be given to r now; "" when it can.
func Unsuitable(n *proto.Node, r Request) string {
	switch {
	case n.Maintenance:
		return "in maintenance"
	case n.ProvisionState != proto.StateAvailable:
		return fmt.Sprintf("in state %s, not available", n.ProvisionState)
	case deref(n.InstanceUUID) != "":
		return "associated with instance " + *n.InstanceUUID
	case deref(n.AllocationUUID) != "":
		return "held by allocation " + *n.AllocationUUID
	case deref(n.ResourceClass) != r.ResourceClass:
		return fmt.Sprintf("of resource class %q, not %q", deref(n.ResourceClass), r.ResourceClass)
	case len(r.CandidateNodes) > 0 && !slices.Contains(r.CandidateNodes, n.UUID):
		return "not a candidate node"
	case r.Owner != "" && deref(n.Owner) != r.Owner && deref(n.Lessee) != r.Owner:
		return "owned by another project"
	case !traits.HasAll(n.Traits, r.Traits):
		return "missing requested traits"
	}
	return ""
}

// Candidates returns the nodes r may get, in the order to try them: shuffled
// (so that allocations running at once do not all try the same node first)
// and then the node named like the allocation, if any, first, as Ironic
// does. shuffle is rand.Shuffle or a test's. With none, the error is
// Ironic's last_error for the case.
func Candidates(nodes []*proto.Node, r Request, shuffle func(n int, swap func(i, j int))) ([]*proto.Node, error) {
	var base, out []*proto.Node
	for _, n := range nodes {
		tr := r
		tr.Traits = nil
		if Unsuitable(n, tr) == "" {
			base = append(base, n)
		}
	}
	if len(base) == 0 {
		if len(r.CandidateNodes) > 0 {
			return nil, fmt.Errorf("none of the requested nodes are available and match the resource class %s", r.ResourceClass)
		}
		return nil, fmt.Errorf("no available nodes match the resource class %s", r.ResourceClass)
	}
	for _, n := range base {
		if traits.HasAll(n.Traits, r.Traits) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no suitable nodes have the requested traits %s", strings.Join(r.Traits, ", "))
	}
	shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if r.Name != "" {
		for i, n := range out {
			if n.Name != nil && *n.Name == r.Name {
				copy(out[1:i+1], out[:i])
				out[0] = n
				break
			}
		}
	}
	return out, nil
}

// ErrUnsuitable: the node no longer suits the allocation (it changed since
// it was listed); try the next one.
var ErrUnsuitable = errors.New("node no longer suits the allocation")

// ErrReserved: a conductor holds the node; it may be free on a later try.
var ErrReserved = errors.New("node is reserved")

// Claim gives n to the allocation r, checking again that it suits: call it
// inside the store's update of n, so that the check and the write are one
// transaction and two allocations can never take the same node. It sets
// allocation_uuid, instance_uuid (the allocation's UUID) and
// instance_info.traits (the requested traits), as Ironic does.
func Claim(n *proto.Node, r Request) error {
	if n.Reservation != nil {
		return fmt.Errorf("node %s: %w by %s", n.UUID, ErrReserved, *n.Reservation)
	}
	if why := Unsuitable(n, r); why != "" {
		return fmt.Errorf("node %s is %s: %w", n.UUID, why, ErrUnsuitable)
	}
	hold(n, r)
	return nil
}

func hold(n *proto.Node, r Request) {
	id := r.UUID
	n.AllocationUUID, n.InstanceUUID = &id, &id
	if n.InstanceInfo == nil {
		n.InstanceInfo = proto.Dict{}
	}
	ts := make([]any, len(r.Traits))
	for i, t := range r.Traits {
		ts[i] = t
	}
	n.InstanceInfo["traits"] = ts
}

// Backfill records r on n, a node already deployed (Ironic's allocation
// backfilling): n must be active, of the resource class (when r names
// one), with the traits, among the candidates and not held by another
// instance or allocation. The error is Ironic's last_error.
func Backfill(n *proto.Node, r Request) error {
	var errs []string
	if n.ProvisionState != proto.StateActive {
		errs = append(errs, fmt.Sprintf(`Node must be in the "active" state, but the current state is "%s"`, n.ProvisionState))
	}
	if r.ResourceClass != "" && deref(n.ResourceClass) != r.ResourceClass {
		errs = append(errs, fmt.Sprintf("Resource class %s does not match the requested resource class %s", deref(n.ResourceClass), r.ResourceClass))
	}
	if len(r.Traits) > 0 && !traits.HasAll(n.Traits, r.Traits) {
		errs = append(errs, fmt.Sprintf("List of traits %v does not match the requested traits %v", n.Traits, r.Traits))
	}
	if len(r.CandidateNodes) > 0 && !slices.Contains(r.CandidateNodes, n.UUID) {
		errs = append(errs, fmt.Sprintf("Candidate nodes must be empty or contain the target node, but got %v", r.CandidateNodes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("Cannot backfill an allocation for node %s: %s", n.UUID, strings.Join(errs, "; "))
	}
	if a := deref(n.AllocationUUID); a != "" && a != r.UUID {
		return &AssociatedError{Node: n.UUID, Instance: a}
	}
	if i := deref(n.InstanceUUID); i != "" && i != r.UUID {
		return &AssociatedError{Node: n.UUID, Instance: i}
	}
	hold(n, r)
	return nil
}

// AssociatedError: the node already serves another instance (Ironic's
// NodeAssociated, a 409).
type AssociatedError struct{ Node, Instance string }

func (e *AssociatedError) Error() string {
	return fmt.Sprintf("Node %s is associated with instance %s.", e.Node, e.Instance)
}

// updateAllowed are Ironic's UPDATE_ALLOWED_STATES: transitions during
// which a node's allocation may still be removed.
var updateAllowed = []proto.ProvisionState{
	proto.StateDeployFailed, proto.StateInspecting, proto.StateInspectFailed, proto.StateInspectWait,
	proto.StateCleanFailed, proto.StateError, proto.StateVerifying, proto.StateAdoptFailed,
	proto.StateRescueFailed, proto.StateUnrescueFailed, proto.StateServiceHold, proto.StateServiceFailed,
}

// CheckRelease says why allocation allocUUID may not let go of n now (a
// Conflict in Ironic): an active node, or one in a transition, outside
// maintenance. nil when it may.
func CheckRelease(n *proto.Node, allocUUID string) error {
	if n.Maintenance {
		return nil
	}
	if t := n.TargetProvisionState; t != nil && *t != "" && !slices.Contains(updateAllowed, n.ProvisionState) {
		return fmt.Errorf("Cannot remove allocation %s for node %s, because the node is in state %s where updates are not allowed (and maintenance mode is off)",
			allocUUID, n.UUID, n.ProvisionState)
	}
	if n.ProvisionState == proto.StateActive {
		return fmt.Errorf("Cannot remove allocation %s for node %s, because the node is active (and maintenance mode is off)", allocUUID, n.UUID)
	}
	return nil
}

// Release frees n from allocation allocUUID: allocation_uuid and the
// instance_uuid it set are cleared. It reports whether n was held by it.
func Release(n *proto.Node, allocUUID string) bool {
	if deref(n.AllocationUUID) != allocUUID {
		return false
	}
	n.AllocationUUID = nil
	n.InstanceUUID = nil
	return true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// instanceRemovalStates are where a node holding an allocation may lose
// its instance_uuid outside maintenance (Ironic's update_node).
var instanceRemovalStates = []proto.ProvisionState{
	proto.StateEnroll, proto.StateInspecting, proto.StateInspectWait, proto.StateManageable, proto.StateAvailable,
}

// EndByInstanceRemoval applies Ironic's rule to a node update (old →
// updated) that removes instance_uuid from a node holding an allocation:
// allowed in maintenance or in instanceRemovalStates, and the allocation
// ends with it: allocation_uuid is cleared on updated and the allocation's
// UUID returned, for the caller to delete. "" when no allocation is
// concerned; the error is Ironic's Conflict.
func EndByInstanceRemoval(old, updated *proto.Node) (string, error) {
	if deref(old.AllocationUUID) == "" || deref(old.InstanceUUID) == "" || deref(updated.InstanceUUID) != "" {
		return "", nil
	}
	if !old.Maintenance && !slices.Contains(instanceRemovalStates, old.ProvisionState) {
		allowed := make([]string, len(instanceRemovalStates))
		for i, s := range instanceRemovalStates {
			allowed[i] = string(s)
		}
		return "", fmt.Errorf("Node %s with an allocation can not have instance_uuid removed unless it is in one of allowed (%s) states or in maintenance mode. Current state is '%s'.",
			old.UUID, strings.Join(allowed, ", "), old.ProvisionState)
	}
	id := *old.AllocationUUID
	updated.AllocationUUID = nil
	return id, nil
}
