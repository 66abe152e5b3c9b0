-- retired, lessee, conductor and description become plain columns that
-- nodeValues writes with the document, as it writes every other column.
-- Generated from doc, they made every write of doc parse it again
-- (doc::jsonb, once per column): an agent heartbeat changes none of them.
-- The values and indexes stay.
ALTER TABLE nodes ALTER COLUMN retired DROP EXPRESSION;
ALTER TABLE nodes ALTER COLUMN lessee DROP EXPRESSION;
ALTER TABLE nodes ALTER COLUMN conductor DROP EXPRESSION;
ALTER TABLE nodes ALTER COLUMN description DROP EXPRESSION;
ALTER TABLE nodes ALTER COLUMN retired SET DEFAULT false;
-- lessee is now a plain column: node_projects' update trigger watches it
-- instead of doc, so a heartbeat, which rewrites only doc, no longer fires it.
DROP TRIGGER nodes_projects_update ON nodes;
CREATE TRIGGER nodes_projects_update AFTER UPDATE OF owner, lessee ON nodes
  FOR EACH ROW WHEN (OLD.owner IS DISTINCT FROM NEW.owner OR OLD.lessee IS DISTINCT FROM NEW.lessee)
  EXECUTE FUNCTION kiln_node_projects();
