package state

import "github.com/kilnhq/kiln/proto"

// agentStates are the states in which the agent ramdisk is (or is about to
// be) running and needs its token: the lookup states, servicing, and the
// holds, where the agent waits for the operator to resume its steps.
var agentStates = append(append([]proto.ProvisionState{}, lookupStates...),
	proto.StateServicing, proto.StateCleanHold, proto.StateDeployHold, proto.StateServiceHold)

// AgentRuns reports whether a node in state s may have a running agent. On
// leaving these states the agent's token and URL are wiped, so that a token
// is never left behind once nothing needs it.
func AgentRuns(s proto.ProvisionState) bool { return contains(agentStates, s) }
