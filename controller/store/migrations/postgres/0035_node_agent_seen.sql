-- When each node's agent last heartbeat, for a heartbeat whose only news
-- is that the agent is still there: one small row upserted instead of the
-- node's documents (doc and masked_doc, some 4 KB) rewritten, at every
-- agent's cadence. last_heartbeat is in microseconds. Readers merge it
-- into driver_internal_info.agent_last_heartbeat when the document holds
-- that key and the row is newer (store/agentseen.go). The primary key
-- serves every read: by node id, one row.
CREATE TABLE node_agent_seen (
    node_id BIGINT PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
    last_heartbeat BIGINT NOT NULL
);
