package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// bulkBatch is how many rows CreateNodes writes per transaction.
const bulkBatch = 1000

// CreateNodes enrolls many nodes, then their ports, with one transaction per
// thousand rows rather than one per row: for imports and for scale tests of
// 100,000 nodes, where the per-row commit is the slow part. Nodes and ports
// are stored exactly as CreateNode and CreatePort store them. A store other
// than Kiln's SQL stores gets them one by one.
func CreateNodes(ctx context.Context, st Store, nodes []*proto.Node, ports []*proto.Port) error {
	s, ok := st.(*sqlStore)
	if !ok {
		for _, n := range nodes {
			if err := st.CreateNode(ctx, n); err != nil {
				return err
			}
		}
		for _, p := range ports {
			if err := st.CreatePort(ctx, p); err != nil {
				return err
			}
		}
		return nil
	}
	nodeInsert := "INSERT INTO nodes (" + strings.Join(nodeColumns, ", ") + ") VALUES (" + placeholders(len(nodeColumns)) + ")"
	for start := 0; start < len(nodes); start += bulkBatch {
		batch := nodes[start:min(start+bulkBatch, len(nodes))]
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			for _, n := range batch {
				if n.UUID == "" {
					return errors.New("create nodes: a UUID is not set")
				}
				n.CreatedAt = wireTime(s.clock())
				vals, err := nodeValues(n)
				if err != nil {
					return err
				}
				if _, err := s.exec(ctx, tx, nodeInsert, vals...); err != nil {
					return s.mapWriteError(err, "create node "+n.UUID)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	portInsert := "INSERT INTO ports (node_id, " + strings.Join(portColumns, ", ") + ") VALUES (?, " + placeholders(len(portColumns)) + ")"
	for start := 0; start < len(ports); start += bulkBatch {
		batch := ports[start:min(start+bulkBatch, len(ports))]
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			for _, p := range batch {
				if p.UUID == "" {
					return errors.New("create ports: a UUID is not set")
				}
				p.CreatedAt = wireTime(s.clock())
				vals, err := portValues(p)
				if err != nil {
					return err
				}
				nodeID, err := s.nodeID(ctx, tx, p.NodeUUID)
				if err != nil {
					return err
				}
				_, err = s.exec(ctx, tx, portInsert, append([]any{nodeID}, vals...)...)
				if err := s.mapPortError(err, "create port "+p.UUID, p.NodeUUID, p.PortgroupUUID); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
