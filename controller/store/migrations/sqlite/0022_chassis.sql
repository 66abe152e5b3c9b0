-- Chassis (Ironic's grouping of nodes) and the nodes' reference to one.
-- The document (doc) is the chassis as stored; uuid, description and the
-- timestamps are columns so that lists filter, sort and page from indexes
-- (every sort key has an index on (expr, id); id is the rowid).
CREATE TABLE chassis (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid        TEXT    NOT NULL UNIQUE,
    description TEXT,
    created_at  INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL DEFAULT 0,
    doc         TEXT    NOT NULL
);
CREATE INDEX chassis_description_sort ON chassis (COALESCE(description, ''));
CREATE INDEX chassis_created_at ON chassis (created_at);
CREATE INDEX chassis_updated_at ON chassis (updated_at);

-- A node's chassis_uuid names an existing chassis; the foreign key refuses a
-- chassis delete while nodes belong to it. Before this migration the field
-- was stored unchecked, so references are cleared rather than trusted.
ALTER TABLE nodes ADD COLUMN chassis_uuid TEXT REFERENCES chassis (uuid);
UPDATE nodes SET doc = json_set(doc, '$.chassis_uuid', json('null'))
  WHERE json_extract(doc, '$.chassis_uuid') IS NOT NULL;
CREATE INDEX nodes_chassis_uuid ON nodes (chassis_uuid);
