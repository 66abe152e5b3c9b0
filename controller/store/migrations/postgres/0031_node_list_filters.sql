-- Node list filters of Ironic that read fields only the document held:
-- retired (1.61), lessee (1.65), conductor (1.49) and description (1.51,
-- ?description_contains=). Generated from the document, so no write can
-- let them drift. Lessee, conductor and retired seek their index on
-- (column, id) in list order; a substring of the description has no index
-- to seek and is matched walking the list order.
ALTER TABLE nodes ADD COLUMN retired BOOLEAN GENERATED ALWAYS AS (COALESCE((doc::jsonb ->> 'retired')::boolean, false)) STORED;
ALTER TABLE nodes ADD COLUMN lessee TEXT COLLATE "C" GENERATED ALWAYS AS (doc::jsonb ->> 'lessee') STORED;
ALTER TABLE nodes ADD COLUMN conductor TEXT COLLATE "C" GENERATED ALWAYS AS (doc::jsonb ->> 'conductor') STORED;
ALTER TABLE nodes ADD COLUMN description TEXT GENERATED ALWAYS AS (doc::jsonb ->> 'description') STORED;
CREATE INDEX nodes_retired ON nodes (retired, id);
CREATE INDEX nodes_lessee ON nodes (lessee, id) WHERE lessee IS NOT NULL;
CREATE INDEX nodes_conductor ON nodes (conductor, id) WHERE conductor IS NOT NULL;

-- Ports are filtered by a substring of their description too (1.97).
ALTER TABLE ports ADD COLUMN description TEXT GENERATED ALWAYS AS (doc::jsonb ->> 'description') STORED;
