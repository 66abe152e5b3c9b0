package state

import (
	"fmt"

	"github.com/kilnhq/kiln/proto"
)

// AbortedReason is last_error for a flow aborted by request from state from.
// The API writes it in the same update that moves the node into its failed
// state, so that no event or read shows the failed state without its reason;
// the conductor, which powers the machine off afterwards, adds to it only if
// that fails.
func AbortedReason(from proto.ProvisionState) string {
	return fmt.Sprintf("Operation aborted by request while node was in %s", from)
}
