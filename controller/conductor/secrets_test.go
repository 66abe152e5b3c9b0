package conductor

import (
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestGuardSecrets(t *testing.T) {
	agentKeys := func() proto.Dict {
		return proto.Dict{proto.InfoAgentToken: "tok-123", proto.InfoAgentTokenPregen: true,
			proto.InfoAgentURL: "http://10.0.0.9:9999", proto.InfoAgentVerifyCA: "PEM", "other": 1}
	}
	for _, tc := range []struct {
		state proto.ProvisionState
		kept  bool
	}{
		{proto.StateCleanWait, true}, {proto.StateDeploying, true}, {proto.StateInspectWait, true},
		{proto.StateServiceHold, true},
		{proto.StateCleanFailed, false}, {proto.StateDeployFailed, false}, {proto.StateInspectFailed, false},
		{proto.StateServiceFailed, false}, {proto.StateAvailable, false}, {proto.StateActive, false},
		{proto.StateManageable, false},
	} {
		le := `execute clean.get_clean_steps on http://10.0.0.9:9999: Post "http://10.0.0.9:9999/v1/commands/?agent_token=tok-123&wait=true": EOF`
		n := &proto.Node{ProvisionState: tc.state, DriverInternalInfo: agentKeys(), LastError: &le}
		guardSecrets(n)
		if got := *n.LastError; got != `execute clean.get_clean_steps on http://10.0.0.9:9999: Post "http://10.0.0.9:9999/v1/commands/?agent_token=******&wait=true": EOF` {
			t.Errorf("%s: last_error not scrubbed: %q", tc.state, got)
		}
		for _, k := range []string{proto.InfoAgentToken, proto.InfoAgentTokenPregen, proto.InfoAgentURL, proto.InfoAgentVerifyCA} {
			if _, has := n.DriverInternalInfo[k]; has != tc.kept {
				t.Errorf("%s: %s kept = %v, want %v", tc.state, k, has, tc.kept)
			}
		}
		if n.DriverInternalInfo["other"] != 1 {
			t.Errorf("%s: unrelated key lost", tc.state)
		}
	}
}
