-- Indexes that keep every node and port list O(page) at any fleet size:
-- each filter and each sort key is served by a B-tree on (key, id), the
-- list's total order, so a keyset page (marker) starts with a seek and
-- stops after LIMIT rows. PostgreSQL orders equal keys by heap position,
-- not id, so the single-column indexes of 0001 are replaced by (key, id).
-- Expression indexes match the sort expressions of nodeSortExprs exactly.
DROP INDEX nodes_provision_state;
DROP INDEX nodes_driver;
DROP INDEX nodes_conductor_group;
DROP INDEX nodes_resource_class;
DROP INDEX nodes_instance_uuid;
DROP INDEX nodes_owner;
CREATE INDEX nodes_provision_state ON nodes (provision_state, id);
CREATE INDEX nodes_driver ON nodes (driver, id);
CREATE INDEX nodes_conductor_group ON nodes (conductor_group, id);
CREATE INDEX nodes_resource_class ON nodes (resource_class, id);
CREATE INDEX nodes_instance_uuid ON nodes (instance_uuid, id);
CREATE INDEX nodes_owner ON nodes (owner, id);
CREATE INDEX nodes_name_sort ON nodes ((COALESCE(name, '')), id);
CREATE INDEX nodes_uuid_sort ON nodes (uuid, id);
CREATE INDEX nodes_created_at ON nodes (created_at, id);
CREATE INDEX nodes_updated_at ON nodes (updated_at, id);
CREATE INDEX nodes_power_state ON nodes (power_state, id);
CREATE INDEX nodes_maintenance ON nodes (maintenance, id);
CREATE INDEX nodes_fault ON nodes (fault, id);
CREATE INDEX nodes_reservation_sort ON nodes ((COALESCE(reservation, '')), id);

DROP INDEX ports_node_id;
CREATE INDEX ports_node_id ON ports (node_id, id);
CREATE INDEX ports_uuid_sort ON ports (uuid, id);
CREATE INDEX ports_address_sort ON ports (address, id);
CREATE INDEX ports_created_at ON ports (created_at, id);
CREATE INDEX ports_updated_at ON ports (updated_at, id);

-- provision_updated_at is a sort key Ironic clients use; it gets a column
-- (microseconds since the epoch, 0 for none) filled from the documents.
ALTER TABLE nodes ADD COLUMN provision_updated_at BIGINT NOT NULL DEFAULT 0;
UPDATE nodes SET provision_updated_at =
    round(EXTRACT(EPOCH FROM (doc::jsonb ->> 'provision_updated_at')::timestamptz) * 1000000)::bigint
  WHERE doc::jsonb ->> 'provision_updated_at' IS NOT NULL;
CREATE INDEX nodes_provision_updated_at ON nodes (provision_updated_at, id);
