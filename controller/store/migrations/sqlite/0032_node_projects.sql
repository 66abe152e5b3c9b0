-- GET /v1/nodes?project=P keeps the nodes that P owns or leases (owner = P
-- OR lessee = P, as Ironic filters). An OR of two columns cannot be read
-- from one index in list order, so each node's projects are kept, by
-- triggers, as rows of node_projects: the list seeks (project, node_id)
-- and reads the nodes by id in order. The rows are the database's alone:
-- no write of Kiln's sets them.
CREATE TABLE node_projects (
    project TEXT    NOT NULL,
    node_id INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    PRIMARY KEY (project, node_id)
) WITHOUT ROWID;
CREATE INDEX node_projects_node ON node_projects (node_id);
INSERT OR IGNORE INTO node_projects (project, node_id) SELECT owner, id FROM nodes WHERE owner <> '';
INSERT OR IGNORE INTO node_projects (project, node_id) SELECT lessee, id FROM nodes WHERE lessee <> '';

CREATE TRIGGER nodes_projects_insert AFTER INSERT ON nodes BEGIN
    INSERT OR IGNORE INTO node_projects (project, node_id) SELECT NEW.owner, NEW.id WHERE NEW.owner <> '';
    INSERT OR IGNORE INTO node_projects (project, node_id) SELECT NEW.lessee, NEW.id WHERE NEW.lessee <> '';
END;
-- Node writes set every column; only a real change of owner or lessee
-- touches node_projects.
CREATE TRIGGER nodes_projects_update AFTER UPDATE OF owner, doc ON nodes
  WHEN OLD.owner IS NOT NEW.owner OR OLD.lessee IS NOT NEW.lessee BEGIN
    DELETE FROM node_projects WHERE node_id = NEW.id;
    INSERT OR IGNORE INTO node_projects (project, node_id) SELECT NEW.owner, NEW.id WHERE NEW.owner <> '';
    INSERT OR IGNORE INTO node_projects (project, node_id) SELECT NEW.lessee, NEW.id WHERE NEW.lessee <> '';
END;
