-- A node's id and row version by UUID, from the index alone: a heartbeat
-- checks that the agent view its controller keeps for the node is still
-- the row's (controller/store/agentcache.go) without reading the row,
-- whose document a committed write has just evicted from every SQLite
-- reader's page cache.
CREATE INDEX nodes_uuid_version ON nodes (uuid, row_version);
