-- What a node's conductor has to do, derived from the document on every
-- write (package nodework), so that the conductor's periodic scan selects
-- the few nodes with work by index instead of decoding every node.
-- work_now: something to do at once (a request, a heartbeat to act on, a
-- pending power change, an interrupted flow); NULL until derived: rows
-- written before this migration, derived when the store opens.
-- wait_heartbeat: a node waiting for its agent, the agent's last heartbeat
-- (microseconds); wait_since: the same without a heartbeat yet, when the
-- wait began. The conductor compares them with its timeouts.
ALTER TABLE nodes ADD COLUMN work_now BOOLEAN;
ALTER TABLE nodes ADD COLUMN wait_heartbeat BIGINT;
ALTER TABLE nodes ADD COLUMN wait_since BIGINT;
CREATE INDEX nodes_work_now ON nodes (conductor_group) WHERE work_now = TRUE;
CREATE INDEX nodes_work_unknown ON nodes (id) WHERE work_now IS NULL;
CREATE INDEX nodes_wait_heartbeat ON nodes (conductor_group, wait_heartbeat) WHERE wait_heartbeat IS NOT NULL;
CREATE INDEX nodes_wait_since ON nodes (conductor_group, wait_since) WHERE wait_since IS NOT NULL;
