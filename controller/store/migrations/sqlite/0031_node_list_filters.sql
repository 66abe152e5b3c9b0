-- Node list filters of Ironic that read fields only the document held:
-- retired (1.61), lessee (1.65), conductor (1.49) and description (1.51,
-- ?description_contains=). Generated from the document, so no write can
-- let them drift; virtual, so they cost only their indexes. Lessee and
-- conductor seek their index in list order; retired too (most nodes are
-- not retired: ?retired=true seeks the few); a substring of the
-- description has no index to seek and is matched walking the list order.
ALTER TABLE nodes ADD COLUMN retired INTEGER GENERATED ALWAYS AS (COALESCE(json_extract(doc, '$.retired'), 0)) VIRTUAL;
ALTER TABLE nodes ADD COLUMN lessee TEXT GENERATED ALWAYS AS (json_extract(doc, '$.lessee')) VIRTUAL;
ALTER TABLE nodes ADD COLUMN conductor TEXT GENERATED ALWAYS AS (json_extract(doc, '$.conductor')) VIRTUAL;
ALTER TABLE nodes ADD COLUMN description TEXT GENERATED ALWAYS AS (json_extract(doc, '$.description')) VIRTUAL;
CREATE INDEX nodes_retired ON nodes (retired);
CREATE INDEX nodes_lessee ON nodes (lessee) WHERE lessee IS NOT NULL;
CREATE INDEX nodes_conductor ON nodes (conductor) WHERE conductor IS NOT NULL;

-- Ports are filtered by a substring of their description too (1.97).
ALTER TABLE ports ADD COLUMN description TEXT GENERATED ALWAYS AS (json_extract(doc, '$.description')) VIRTUAL;
