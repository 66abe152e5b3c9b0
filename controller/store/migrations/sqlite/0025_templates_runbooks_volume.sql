-- Deploy templates, runbooks, volume connectors and volume targets, each a
-- described resource (store.Resource): doc is the object as stored, the
-- other columns index it for filters, sorting and uniqueness. Every sort
-- key has an index on its expression (SQLite appends the rowid, id).
CREATE TABLE deploy_templates (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid       TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL DEFAULT 0,
    doc        TEXT    NOT NULL
);
CREATE INDEX deploy_templates_created_at ON deploy_templates (created_at);
CREATE INDEX deploy_templates_updated_at ON deploy_templates (updated_at);

CREATE TABLE runbooks (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid       TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL UNIQUE,
    owner      TEXT,
    public     INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL DEFAULT 0,
    doc        TEXT    NOT NULL
);
CREATE INDEX runbooks_owner ON runbooks (owner);
CREATE INDEX runbooks_public ON runbooks (public);
CREATE INDEX runbooks_created_at ON runbooks (created_at);
CREATE INDEX runbooks_updated_at ON runbooks (updated_at);

-- A connector or target belongs to a node and goes with it (Ironic deletes
-- them with the node).
CREATE TABLE volume_connectors (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid         TEXT    NOT NULL UNIQUE,
    node_uuid    TEXT    NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    type         TEXT    NOT NULL,
    connector_id TEXT    NOT NULL,
    created_at   INTEGER NOT NULL DEFAULT 0,
    updated_at   INTEGER NOT NULL DEFAULT 0,
    doc          TEXT    NOT NULL,
    UNIQUE (type, connector_id)
);
CREATE INDEX volume_connectors_node_uuid ON volume_connectors (node_uuid);
CREATE INDEX volume_connectors_connector_id ON volume_connectors (connector_id);
CREATE INDEX volume_connectors_type_sort ON volume_connectors (type);
CREATE INDEX volume_connectors_created_at ON volume_connectors (created_at);
CREATE INDEX volume_connectors_updated_at ON volume_connectors (updated_at);

CREATE TABLE volume_targets (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid        TEXT    NOT NULL UNIQUE,
    node_uuid   TEXT    NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    volume_type TEXT    NOT NULL,
    volume_id   TEXT    NOT NULL,
    boot_index  INTEGER NOT NULL,
    created_at  INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL DEFAULT 0,
    doc         TEXT    NOT NULL,
    UNIQUE (node_uuid, boot_index)
);
CREATE INDEX volume_targets_node_uuid ON volume_targets (node_uuid);
CREATE INDEX volume_targets_volume_type ON volume_targets (volume_type);
CREATE INDEX volume_targets_volume_id ON volume_targets (volume_id);
CREATE INDEX volume_targets_boot_index ON volume_targets (boot_index);
CREATE INDEX volume_targets_created_at ON volume_targets (created_at);
CREATE INDEX volume_targets_updated_at ON volume_targets (updated_at);
