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
