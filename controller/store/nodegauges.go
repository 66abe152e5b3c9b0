package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The /metrics node gauges used to list every node, decoded, at each
// scrape: at 10,000 nodes that was seconds of CPU per scrape, and on a
// busy controller it ran past the collector's deadline, so the whole
// endpoint answered 500. NodeGauges reads the same figures from the
// indexed columns (a GROUP BY) and, for the heartbeat ages, only the
// stored documents that hold a heartbeat, scanned for that one key.

// NodeCount is how many nodes share a provision state, a power state ("" for
// none) and a maintenance flag.
type NodeCount struct {
	ProvisionState string
	PowerState     string
	Maintenance    bool
	Count          int
}

// AgentBeat is the last heartbeat of a node's agent.
type AgentBeat struct {
	UUID string
	Last time.Time
}

// nodeGaugeCountQuery counts nodes by the gauge's labels.
const nodeGaugeCountQuery = "SELECT provision_state, power_state, maintenance, COUNT(*) FROM nodes GROUP BY provision_state, power_state, maintenance"

// nodeGaugeBeatQuery reads the documents that may hold an agent's last
// heartbeat, with the node's narrow stamp (agentseen.go).
const nodeGaugeBeatQuery = "SELECT uuid, doc, " + seenJoined + " FROM " + nodesSeen +
	" WHERE doc LIKE '%\"agent_last_heartbeat\"%'"

// NodeGauges counts the nodes by provision state, power state and
// maintenance, and reads the last heartbeat of every node whose
// driver_internal_info records one (its narrow stamp merged, as every read
// of a node does). st must be an SQL store (or wrap one).
func NodeGauges(ctx context.Context, st Store) ([]NodeCount, []AgentBeat, error) {
	s, err := sqlOf(st)
	if err != nil {
		return nil, nil, err
	}
	counts, err := s.nodeCounts(ctx)
	if err != nil {
		return nil, nil, err
	}
	beats, err := s.agentBeats(ctx)
	if err != nil {
		return nil, nil, err
	}
	return counts, beats, nil
}

func (s *sqlStore) nodeCounts(ctx context.Context) ([]NodeCount, error) {
	rows, err := s.query(ctx, s.rdb, nodeGaugeCountQuery)
	if err != nil {
		return nil, fmt.Errorf("count nodes: %w", err)
	}
	defer rows.Close()
	var out []NodeCount
	for rows.Next() {
		var c NodeCount
		if err := rows.Scan(&c.ProvisionState, &c.PowerState, &c.Maintenance, &c.Count); err != nil {
			return nil, fmt.Errorf("count nodes: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count nodes: %w", err)
	}
	return out, nil
}

func (s *sqlStore) agentBeats(ctx context.Context) ([]AgentBeat, error) {
	rows, err := s.query(ctx, s.rdb, nodeGaugeBeatQuery)
	if err != nil {
		return nil, fmt.Errorf("read agent heartbeats: %w", err)
	}
	defer rows.Close()
	var out []AgentBeat
	for rows.Next() {
		var (
			uuid string
			doc  []byte
			seen sql.NullInt64
		)
		if err := rows.Scan(&uuid, &doc, &seen); err != nil {
			return nil, fmt.Errorf("read agent heartbeats: %w", err)
		}
		stamp, present, err := docStamp(doc, false)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", uuid, err)
		}
		if !present {
			continue
		}
		last := parseStamp(stamp)
		if seen.Valid && newerSeen(stamp, seen.Int64) {
			last = time.UnixMicro(seen.Int64).UTC()
		}
		if last.IsZero() {
			continue
		}
		out = append(out, AgentBeat{UUID: uuid, Last: last})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read agent heartbeats: %w", err)
	}
	return out, nil
}
