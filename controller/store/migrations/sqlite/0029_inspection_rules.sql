-- Inspection rules (/v1/inspection_rules), a described resource
-- (store.Resource): doc is the rule as stored, the other columns serve the
-- list's phase filter and sort keys. Every sort key and filter has an index
-- on its expression (SQLite appends the rowid, id).
CREATE TABLE inspection_rules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid        TEXT    NOT NULL UNIQUE,
    phase       TEXT    NOT NULL,
    priority    INTEGER NOT NULL DEFAULT 0,
    description TEXT    NOT NULL DEFAULT '',
    sensitive   INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL DEFAULT 0,
    doc         TEXT    NOT NULL
);
CREATE INDEX inspection_rules_phase ON inspection_rules (phase);
CREATE INDEX inspection_rules_priority ON inspection_rules (priority);
CREATE INDEX inspection_rules_description ON inspection_rules (description);
CREATE INDEX inspection_rules_sensitive ON inspection_rules (sensitive);
CREATE INDEX inspection_rules_created_at ON inspection_rules (created_at);
CREATE INDEX inspection_rules_updated_at ON inspection_rules (updated_at);
