-- What a node's BMC reported of its hardware configuration: BIOS settings
-- (GET /v1/nodes/{id}/bios) and firmware components (/firmware). Each
-- node's rows are replaced whole when its driver re-reads them; lists are
-- by node, in name order, served by the primary keys.
CREATE TABLE node_bios (
    node_id    INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    name       TEXT    NOT NULL,
    created_at INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL DEFAULT 0,
    doc        TEXT    NOT NULL,
    PRIMARY KEY (node_id, name)
);

CREATE TABLE node_firmware (
    node_id    INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    component  TEXT    NOT NULL,
    created_at INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL DEFAULT 0,
    doc        TEXT    NOT NULL,
    PRIMARY KEY (node_id, component)
);
