-- Port names are unique, as in Ironic (a name is a way to address a port),
-- and sortable: they get their own column with a unique index.
ALTER TABLE ports ADD COLUMN name TEXT COLLATE "C";
UPDATE ports SET name = doc::jsonb->>'name';
-- Older Kiln stored duplicate names. The oldest port keeps its name; each
-- later one loses it, moved to extra.kiln_duplicate_name so nothing is lost
-- and an operator can rename it.
UPDATE ports SET doc = jsonb_set(doc::jsonb - 'name', '{extra}',
        (CASE WHEN jsonb_typeof(doc::jsonb->'extra') = 'object' THEN doc::jsonb->'extra' ELSE '{}'::jsonb END)
        || jsonb_build_object('kiln_duplicate_name', name))::text
 WHERE name IS NOT NULL AND EXISTS (SELECT 1 FROM ports p2 WHERE p2.name = ports.name AND p2.id < ports.id);
UPDATE ports SET name = NULL WHERE doc::jsonb->>'name' IS NULL;
CREATE UNIQUE INDEX ports_name_key ON ports (name);
