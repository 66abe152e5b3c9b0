package conductor

import (
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// guardSecrets runs on every node the conductor writes: last_error is
// scrubbed of agent tokens and URL credentials (agent client errors carry
// the URL they called), and outside the states where an agent runs the
// agent's token and URL are wiped, as Ironic's wipe_token_and_url does when
// cleaning, deployment, inspection or servicing ends or fails.
func guardSecrets(n *proto.Node) {
	if n.LastError != nil {
		s := secrets.Scrub(*n.LastError)
		n.LastError = &s
	}
	if !state.AgentRuns(n.ProvisionState) {
		flowstate.Update(n, (*flowstate.State).ForgetAgent)
	}
}
