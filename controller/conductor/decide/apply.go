package decide

import (
	"fmt"
	"time"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// Apply makes u's change to n at time now (the moment a state change is
// stamped with): the executor calls it inside the store's read-modify-write,
// tests on a copy of the node.
func Apply(n *proto.Node, u Update, now time.Time) error {
	if n.DriverInternalInfo == nil {
		n.DriverInternalInfo = proto.Dict{}
	}
	var moveErr error
	if u.Move != "" {
		moveErr = move(n, u.Move, now)
		if moveErr != nil && !u.Force {
			return moveErr
		}
	}
	if u.Node != nil {
		u.Node(n)
	}
	if u.Flow != nil {
		flowstate.Update(n, u.Flow)
	}
	return moveErr
}

// move takes the state-machine arrow ev.
func move(n *proto.Node, ev state.Event, now time.Time) error {
	sn := state.Node{State: n.ProvisionState, Maintenance: n.Maintenance, Protected: n.Protected, Retired: n.Retired}
	if n.TargetProvisionState != nil {
		sn.Target = *n.TargetProvisionState
	}
	t, err := state.Next(sn, ev)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.UUID, err)
	}
	n.ProvisionState = t.To
	n.TargetProvisionState = nil
	if t.Target != proto.NoState {
		target := t.Target
		n.TargetProvisionState = &target
	}
	n.ProvisionUpdatedAt = &proto.Time{Time: now.UTC().Truncate(time.Microsecond)}
	return nil
}
