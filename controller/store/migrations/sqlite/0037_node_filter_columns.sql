-- retired, lessee, conductor and description become plain columns that
-- nodeValues writes with the document, as it writes every other column.
-- Generated from doc, they made every write of doc parse it again for
-- their indexes, old and new document alike: an agent heartbeat, which
-- changes none of them, spent a tenth of its CPU there.
-- node_projects' triggers read NEW.lessee, so they go while the column is
-- rebuilt and come back watching the plain columns (a heartbeat, which
-- rewrites only doc, then no longer fires them).
DROP TRIGGER nodes_projects_insert;
DROP TRIGGER nodes_projects_update;
DROP INDEX nodes_retired;
DROP INDEX nodes_lessee;
DROP INDEX nodes_conductor;
ALTER TABLE nodes DROP COLUMN retired;
ALTER TABLE nodes DROP COLUMN lessee;
ALTER TABLE nodes DROP COLUMN conductor;
ALTER TABLE nodes DROP COLUMN description;
ALTER TABLE nodes ADD COLUMN retired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN lessee TEXT;
ALTER TABLE nodes ADD COLUMN conductor TEXT;
ALTER TABLE nodes ADD COLUMN description TEXT;
UPDATE nodes SET retired = COALESCE(json_extract(doc, '$.retired'), 0), lessee = json_extract(doc, '$.lessee'),
  conductor = json_extract(doc, '$.conductor'), description = json_extract(doc, '$.description');
CREATE INDEX nodes_retired ON nodes (retired);
CREATE INDEX nodes_lessee ON nodes (lessee) WHERE lessee IS NOT NULL;
CREATE INDEX nodes_conductor ON nodes (conductor) WHERE conductor IS NOT NULL;
CREATE TRIGGER nodes_projects_insert AFTER INSERT ON nodes BEGIN
    INSERT OR IGNORE INTO node_projects (project, node_id) SELECT NEW.owner, NEW.id WHERE NEW.owner <> '';
    INSERT OR IGNORE INTO node_projects (project, node_id) SELECT NEW.lessee, NEW.id WHERE NEW.lessee <> '';
END;
CREATE TRIGGER nodes_projects_update AFTER UPDATE OF owner, lessee ON nodes
  WHEN OLD.owner IS NOT NEW.owner OR OLD.lessee IS NOT NEW.lessee BEGIN
    DELETE FROM node_projects WHERE node_id = NEW.id;
    INSERT OR IGNORE INTO node_projects (project, node_id) SELECT NEW.owner, NEW.id WHERE NEW.owner <> '';
    INSERT OR IGNORE INTO node_projects (project, node_id) SELECT NEW.lessee, NEW.id WHERE NEW.lessee <> '';
END;
