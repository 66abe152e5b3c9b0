-- Port names are unique, as in Ironic (a name is a way to address a port),
-- and sortable: they get their own column with a unique index.
ALTER TABLE ports ADD COLUMN name TEXT;
UPDATE ports SET name = json_extract(doc, '$.name');
-- Older Kiln stored duplicate names. The oldest port keeps its name; each
-- later one loses it, moved to extra.kiln_duplicate_name so nothing is lost
-- and an operator can rename it.
UPDATE ports SET doc = json_set(json_remove(doc, '$.name'), '$.extra.kiln_duplicate_name', name)
 WHERE name IS NOT NULL AND EXISTS (SELECT 1 FROM ports p2 WHERE p2.name = ports.name AND p2.id < ports.id);
UPDATE ports SET name = NULL WHERE json_extract(doc, '$.name') IS NULL;
CREATE UNIQUE INDEX ports_name ON ports (name);
