package conductor

import (
	"context"
	"fmt"
	"maps"

	"github.com/kilnhq/kiln/controller/agentclient"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// AgentClient is what the conductor needs of the agent's :9999 API;
// *agentclient.Client implements it.
type AgentClient interface {
	GetSteps(ctx context.Context, a agentclient.Agent, kind proto.StepKind, node, ports any) (proto.StepsResult, error)
	ExecuteStep(ctx context.Context, a agentclient.Agent, kind proto.StepKind, step proto.StepCall, node, ports any, versions map[string]string) (proto.CommandResult, error)
	Commands(ctx context.Context, a agentclient.Agent) ([]proto.CommandResult, error)
	PowerOff(ctx context.Context, a agentclient.Agent) error
	GetPartitionUUIDs(ctx context.Context, a agentclient.Agent) (proto.PartitionUUIDs, error)
	InstallBootloader(ctx context.Context, a agentclient.Agent, p proto.InstallBootloaderParams) (proto.CommandResult, error)
	FinalizeRescue(ctx context.Context, a agentclient.Agent, password string, hashed bool) error
}

var _ AgentClient = (*agentclient.Client)(nil)

// agentOf is the agent the node's last heartbeat described.
func agentOf(n *proto.Node) agentclient.Agent {
	fs, _ := flowstate.Read(n, flowstate.PartAgent)
	return agentclient.Agent{URL: fs.Agent.URL, Token: fs.Agent.Token, VerifyCA: fs.Agent.VerifyCA}
}

// nodeForAgent is the node as the agent may see it: secrets masked at any
// depth, except the config drive, which the agent writes (Ironic sends it
// too: as_dict(mask_configdrive=False)).
func nodeForAgent(n *proto.Node) *proto.Node {
	m := secrets.Node(n)
	if cd, ok := n.InstanceInfo["configdrive"]; ok {
		m.InstanceInfo = maps.Clone(m.InstanceInfo)
		m.InstanceInfo["configdrive"] = cd
	}
	return &m
}

func (f *flow) portsForAgent(ctx context.Context) ([]*proto.Port, error) {
	ports, err := f.c.st.ListPorts(ctx, store.PortQuery{NodeUUID: f.n.UUID})
	if err != nil {
		return nil, fmt.Errorf("list ports of node %s: %w", f.n.UUID, err)
	}
	return ports, nil
}
