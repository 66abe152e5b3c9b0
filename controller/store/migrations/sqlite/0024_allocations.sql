-- Allocations (Ironic's requests for a node by resource class and traits).
-- The document (doc) is the allocation as stored; the columns index it so
-- that lists filter (node, resource class, state, owner, name), sort and
-- page from indexes: in SQLite an index on (x) is (x, rowid) and id is the
-- rowid. The node an allocation holds also names it (allocation_uuid in
-- the node's document).
CREATE TABLE allocations (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid           TEXT    NOT NULL UNIQUE,
    name           TEXT    UNIQUE,
    node_uuid      TEXT,
    resource_class TEXT,
    state          TEXT    NOT NULL,
    owner          TEXT,
    created_at     INTEGER NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL DEFAULT 0,
    doc            TEXT    NOT NULL
);
CREATE INDEX allocations_name_sort ON allocations (COALESCE(name, ''));
CREATE INDEX allocations_node_uuid ON allocations (node_uuid);
CREATE INDEX allocations_resource_class ON allocations (resource_class);
CREATE INDEX allocations_resource_class_sort ON allocations (COALESCE(resource_class, ''));
CREATE INDEX allocations_state ON allocations (state);
CREATE INDEX allocations_owner ON allocations (owner);
CREATE INDEX allocations_owner_sort ON allocations (COALESCE(owner, ''));
CREATE INDEX allocations_created_at ON allocations (created_at);
CREATE INDEX allocations_updated_at ON allocations (updated_at);
