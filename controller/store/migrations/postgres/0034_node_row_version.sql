-- A node row's version: bumped, in the same UPDATE, by every write that
-- changes what the API renders of the node (doc, masked_doc, reservation,
-- provision_state), so that a reader holding a node's rendering checks it
-- against (id, row_version) alone instead of reading the whole document
-- back to compare it. Rows written before this migration start at 0, as
-- new rows do: ids are never reused, so (id, row_version) names one
-- content. The index serves a page of (id, row_version) in id order
-- without reading the rows.
ALTER TABLE nodes ADD COLUMN row_version BIGINT NOT NULL DEFAULT 0;
CREATE INDEX nodes_row_version ON nodes (id, row_version);
