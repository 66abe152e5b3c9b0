-- Node fields that lists filter on since microversions 1.82 (shard), 1.83
-- (parent_node) and 1.104 (instance_name), as columns derived from the
-- document like the others. Lists leave child nodes out unless asked, so
-- parent_node's index holds only children: a parent list reads the sort
-- order's index and skips them, a children list seeks this one.
ALTER TABLE nodes ADD COLUMN shard TEXT;
ALTER TABLE nodes ADD COLUMN parent_node TEXT;
ALTER TABLE nodes ADD COLUMN instance_name TEXT;
UPDATE nodes SET shard = json_extract(doc, '$.shard'),
                 parent_node = json_extract(doc, '$.parent_node'),
                 instance_name = json_extract(doc, '$.instance_name');
CREATE INDEX nodes_shard ON nodes (shard);
CREATE INDEX nodes_parent_node ON nodes (parent_node) WHERE parent_node IS NOT NULL;
CREATE INDEX nodes_instance_name ON nodes (instance_name) WHERE instance_name IS NOT NULL;
