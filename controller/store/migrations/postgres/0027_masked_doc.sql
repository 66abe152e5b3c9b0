-- A node's masked document: the node as the API shows it (secrets masked,
-- last_error scrubbed), encoded once when the node is written, so that
-- reads pass it through instead of decoding, masking and re-encoding the
-- document per request. NULL means "derive it from doc": rows written
-- before this migration, and any write that changes doc without writing
-- masked_doc in the same statement (an agent heartbeat's jsonb_set), which
-- the trigger catches so that a stale copy is never served.
ALTER TABLE nodes ADD COLUMN masked_doc TEXT;
CREATE FUNCTION nodes_masked_doc_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.doc IS DISTINCT FROM OLD.doc AND NEW.masked_doc IS NOT DISTINCT FROM OLD.masked_doc THEN
    NEW.masked_doc := NULL;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER nodes_masked_doc_stale BEFORE UPDATE ON nodes
  FOR EACH ROW EXECUTE FUNCTION nodes_masked_doc_stale();
