package api

import (
	"errors"

	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// machineNode is what the state machine needs to know of a node.
func machineNode(n *proto.Node) state.Node {
	sn := state.Node{State: n.ProvisionState, Maintenance: n.Maintenance, Protected: n.Protected, Retired: n.Retired}
	if n.TargetProvisionState != nil {
		sn.Target = *n.TargetProvisionState
	}
	return sn
}

// stateError turns a refusal of the state machine into Ironic's answer.
func stateError(n *proto.Node, err error) error {
	var se *state.Error
	if !errors.As(err, &se) {
		return err
	}
	return &Error{Code: se.Status(n.Reservation != nil), Msg: se.Faultstring(n.UUID)}
}

// transition is the state change a provision request makes right away.
type transition struct {
	from, to proto.ProvisionState
	target   *proto.ProvisionState
}

// provisionTransition validates verb for n at the microversion and returns
// the states to record.
func provisionTransition(n *proto.Node, verb proto.Verb, minor int) (transition, error) {
	t, err := state.Request(machineNode(n), verb, minor)
	if err != nil {
		return transition{}, stateError(n, err)
	}
	out := transition{from: t.From, to: t.To}
	if t.Target != proto.NoState {
		target := t.Target
		out.target = &target
	}
	return out, nil
}

// deleteAllowed applies Ironic's rules for DELETE /v1/nodes/{id}.
func deleteAllowed(n *proto.Node) error {
	inst := ""
	if n.InstanceUUID != nil {
		inst = *n.InstanceUUID
	}
	return stateError(n, state.DeleteAllowed(machineNode(n), inst))
}

// patchAllowed applies Ironic's rules for PATCH during a flow.
func patchAllowed(n *proto.Node, minor int, onlyRemovesInstanceUUID bool) error {
	return stateError(n, state.PatchAllowed(machineNode(n), minor, onlyRemovesInstanceUUID))
}
