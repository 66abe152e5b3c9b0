-- Indexes that keep every node and port list O(page) at any fleet size:
-- each filter and each sort key is served by an index ordered by
-- (key, id), the list's total order, so a keyset page (marker) starts with
-- a seek and stops after LIMIT rows. In SQLite an index on (x) is already
-- (x, rowid) and id is the rowid, so the filters indexed in 0001 need
-- nothing more. Expression indexes match the sort expressions of
-- nodeSortExprs exactly, or the planner cannot use them.
CREATE INDEX nodes_name_sort ON nodes (COALESCE(name, ''));
CREATE INDEX nodes_created_at ON nodes (created_at);
CREATE INDEX nodes_updated_at ON nodes (updated_at);
CREATE INDEX nodes_power_state ON nodes (power_state);
CREATE INDEX nodes_maintenance ON nodes (maintenance);
CREATE INDEX nodes_fault ON nodes (fault);
CREATE INDEX nodes_reservation_sort ON nodes (COALESCE(reservation, ''));

CREATE INDEX ports_created_at ON ports (created_at);
CREATE INDEX ports_updated_at ON ports (updated_at);

-- provision_updated_at is a sort key Ironic clients use; it gets a column
-- (microseconds since the epoch, 0 for none) filled from the documents.
-- Stored timestamps are always UTC in proto.TimeLayout:
-- 2006-01-02T15:04:05.000000+00:00.
ALTER TABLE nodes ADD COLUMN provision_updated_at INTEGER NOT NULL DEFAULT 0;
UPDATE nodes SET provision_updated_at =
    CAST(strftime('%s', substr(json_extract(doc, '$.provision_updated_at'), 1, 19)) AS INTEGER) * 1000000 +
    CAST(substr(json_extract(doc, '$.provision_updated_at'), 21, 6) AS INTEGER)
  WHERE json_extract(doc, '$.provision_updated_at') IS NOT NULL;
CREATE INDEX nodes_provision_updated_at ON nodes (provision_updated_at);
