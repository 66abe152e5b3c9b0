-- A node's masked document: the node as the API shows it (secrets masked,
-- last_error scrubbed), encoded once when the node is written, so that
-- reads pass it through instead of decoding, masking and re-encoding the
-- document per request. NULL means "derive it from doc": rows written
-- before this migration, and any write that changes doc without writing
-- masked_doc in the same statement (an agent heartbeat's json_set), which
-- the trigger catches so that a stale copy is never served.
ALTER TABLE nodes ADD COLUMN masked_doc TEXT;
CREATE TRIGGER nodes_masked_doc_stale AFTER UPDATE OF doc ON nodes
  WHEN NEW.doc IS NOT OLD.doc AND NEW.masked_doc IS OLD.masked_doc
BEGIN
  UPDATE nodes SET masked_doc = NULL WHERE id = NEW.id;
END;
