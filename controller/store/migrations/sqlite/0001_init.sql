-- Kiln's initial schema (SQLite). Each object is a JSON document (doc) plus the
-- columns Kiln filters, sorts, joins and locks on, derived from the document
-- by the store; timestamps in those columns are microseconds since the epoch.
CREATE TABLE nodes (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid            TEXT    NOT NULL UNIQUE,
    name            TEXT    UNIQUE,
    driver          TEXT    NOT NULL DEFAULT '',
    provision_state TEXT    NOT NULL DEFAULT '',
    power_state     TEXT    NOT NULL DEFAULT '',
    maintenance     BOOLEAN NOT NULL DEFAULT FALSE,
    instance_uuid   TEXT    NOT NULL DEFAULT '',
    conductor_group TEXT    NOT NULL DEFAULT '',
    resource_class  TEXT    NOT NULL DEFAULT '',
    owner           TEXT    NOT NULL DEFAULT '',
    fault           TEXT    NOT NULL DEFAULT '',
    reservation     TEXT,
    created_at      INTEGER NOT NULL DEFAULT 0,
    updated_at      INTEGER NOT NULL DEFAULT 0,
    doc             TEXT    NOT NULL
);
CREATE INDEX nodes_provision_state ON nodes (provision_state);
CREATE INDEX nodes_driver ON nodes (driver);
CREATE INDEX nodes_conductor_group ON nodes (conductor_group);
CREATE INDEX nodes_resource_class ON nodes (resource_class);
CREATE INDEX nodes_instance_uuid ON nodes (instance_uuid);
CREATE INDEX nodes_owner ON nodes (owner);
CREATE INDEX nodes_reservation ON nodes (reservation) WHERE reservation IS NOT NULL;

CREATE TABLE ports (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid       TEXT    NOT NULL UNIQUE,
    address    TEXT    NOT NULL UNIQUE,
    node_id    INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL DEFAULT 0,
    doc        TEXT    NOT NULL
);
CREATE INDEX ports_node_id ON ports (node_id);

CREATE TABLE node_history (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid       TEXT    NOT NULL UNIQUE,
    node_id    INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL DEFAULT 0,
    doc        TEXT    NOT NULL
);
CREATE INDEX node_history_node_id ON node_history (node_id, id);

CREATE TABLE node_inventory (
    node_id     INTEGER PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
    inventory   TEXT,
    plugin_data TEXT,
    updated_at  INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE conductors (
    hostname        TEXT    PRIMARY KEY,
    conductor_group TEXT    NOT NULL DEFAULT '',
    drivers         TEXT    NOT NULL DEFAULT '[]',
    online          BOOLEAN NOT NULL DEFAULT TRUE,
    created_at      INTEGER NOT NULL DEFAULT 0,
    updated_at      INTEGER NOT NULL DEFAULT 0
);
