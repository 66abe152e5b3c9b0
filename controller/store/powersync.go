package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/kilnhq/kiln/proto"
)

// PowerSyncNode is what the power-state sync needs to plan a round: the
// node's state from its columns and its BMC's address. The node itself is
// read (and its driver_info decoded) only when its BMC is called, under
// its reservation.
type PowerSyncNode struct {
	UUID           string
	ProvisionState proto.ProvisionState
	PowerState     proto.PowerState // "" when never read
	// BMC is driver_info's redfish_address, ipmi_address and bmc_address,
	// "" where absent: nodes behind one BMC are paced together.
	BMC [3]string
}

// PowerSyncAddressKeys are the driver_info keys PowerSyncNode.BMC holds,
// in order.
var PowerSyncAddressKeys = [3]string{"redfish_address", "ipmi_address", "bmc_address"}

// PowerSyncNodes returns the free nodes of conductorGroup that are not in
// maintenance and have no work (work_now, migration 0033: no request, no
// pending power change, no running flow): the nodes a sync may read. The
// rows come from the conductor group index; only the address keys are
// extracted from the document, by the database.
func (s *sqlStore) PowerSyncNodes(ctx context.Context, conductorGroup string) ([]PowerSyncNode, error) {
	query := "SELECT uuid, provision_state, power_state"
	for _, k := range PowerSyncAddressKeys {
		query += ", " + s.d.jsonText("driver_info", k)
	}
	query += " FROM nodes WHERE conductor_group = ? AND reservation IS NULL AND maintenance = FALSE AND work_now = FALSE"
	rows, err := s.query(ctx, s.rdb, query, conductorGroup)
	if err != nil {
		return nil, fmt.Errorf("list nodes for power sync: %w", err)
	}
	defer rows.Close()
	var out []PowerSyncNode
	for rows.Next() {
		var n PowerSyncNode
		var addr [3]sql.NullString
		if err := rows.Scan(&n.UUID, &n.ProvisionState, &n.PowerState, &addr[0], &addr[1], &addr[2]); err != nil {
			return nil, fmt.Errorf("list nodes for power sync: %w", err)
		}
		for i, a := range addr {
			n.BMC[i] = a.String
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes for power sync: %w", err)
	}
	return out, nil
}
