-- Ports sort by name (0012 gave names their own column) through an index
-- on the sort expression of portSortExprs, as 0018 does for nodes, so a
-- name-sorted page starts with a seek.
CREATE INDEX ports_name_sort ON ports (COALESCE(name, ''));
