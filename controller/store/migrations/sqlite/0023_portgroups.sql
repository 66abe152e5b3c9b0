-- Port groups (Ironic's link aggregates of a node's ports) and the ports'
-- membership. The document (doc) is the port group as stored; uuid, name,
-- address and node_uuid are columns so that lookups are unique and lists
-- filter, sort and page from indexes (every sort key has an index on
-- (expr, id); id is the rowid). A node's delete removes its port groups.
CREATE TABLE portgroups (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid       TEXT    NOT NULL UNIQUE,
    name       TEXT    UNIQUE,
    address    TEXT    UNIQUE,
    node_uuid  TEXT    NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    created_at INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL DEFAULT 0,
    doc        TEXT    NOT NULL
);
CREATE INDEX portgroups_name_sort ON portgroups (COALESCE(name, ''));
CREATE INDEX portgroups_address_sort ON portgroups (COALESCE(address, ''));
CREATE INDEX portgroups_node_uuid ON portgroups (node_uuid);
CREATE INDEX portgroups_created_at ON portgroups (created_at);
CREATE INDEX portgroups_updated_at ON portgroups (updated_at);

-- A port's portgroup_uuid names an existing port group of its node; the
-- foreign key refuses a port group's delete while ports belong to it.
-- Before this migration the field could not be set, so it is cleared.
ALTER TABLE ports ADD COLUMN portgroup_uuid TEXT REFERENCES portgroups (uuid);
UPDATE ports SET doc = json_set(doc, '$.portgroup_uuid', json('null'))
  WHERE json_extract(doc, '$.portgroup_uuid') IS NOT NULL;
CREATE INDEX ports_portgroup_uuid ON ports (portgroup_uuid);
