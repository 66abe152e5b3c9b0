-- Port and port group lists filter by their node's conductor group (1.99)
-- and shard (ports 1.82, port groups 1.106). Each row carries a copy of its
-- node's two fields, kept by triggers, so that those lists seek an index
-- on the copy in list order instead of reading every port to join it with
-- its node. The copies are the database's alone: the documents do not
-- hold them and no write of Kiln's sets them.
ALTER TABLE ports ADD COLUMN node_conductor_group TEXT;
ALTER TABLE ports ADD COLUMN node_shard TEXT;
ALTER TABLE portgroups ADD COLUMN node_conductor_group TEXT;
ALTER TABLE portgroups ADD COLUMN node_shard TEXT;
UPDATE ports SET node_conductor_group = (SELECT conductor_group FROM nodes WHERE nodes.id = ports.node_id),
                 node_shard = (SELECT shard FROM nodes WHERE nodes.id = ports.node_id);
UPDATE portgroups SET node_conductor_group = (SELECT conductor_group FROM nodes WHERE nodes.uuid = portgroups.node_uuid),
                      node_shard = (SELECT shard FROM nodes WHERE nodes.uuid = portgroups.node_uuid);
CREATE INDEX ports_node_conductor_group ON ports (node_conductor_group);
CREATE INDEX ports_node_shard ON ports (node_shard) WHERE node_shard IS NOT NULL;
CREATE INDEX portgroups_node_conductor_group ON portgroups (node_conductor_group);
CREATE INDEX portgroups_node_shard ON portgroups (node_shard) WHERE node_shard IS NOT NULL;

CREATE TRIGGER ports_node_placement_insert AFTER INSERT ON ports BEGIN
    UPDATE ports SET node_conductor_group = (SELECT conductor_group FROM nodes WHERE id = NEW.node_id),
                     node_shard = (SELECT shard FROM nodes WHERE id = NEW.node_id)
      WHERE id = NEW.id;
END;
CREATE TRIGGER ports_node_placement_move AFTER UPDATE OF node_id ON ports BEGIN
    UPDATE ports SET node_conductor_group = (SELECT conductor_group FROM nodes WHERE id = NEW.node_id),
                     node_shard = (SELECT shard FROM nodes WHERE id = NEW.node_id)
      WHERE id = NEW.id;
END;
CREATE TRIGGER portgroups_node_placement_insert AFTER INSERT ON portgroups BEGIN
    UPDATE portgroups SET node_conductor_group = (SELECT conductor_group FROM nodes WHERE uuid = NEW.node_uuid),
                          node_shard = (SELECT shard FROM nodes WHERE uuid = NEW.node_uuid)
      WHERE id = NEW.id;
END;
CREATE TRIGGER portgroups_node_placement_move AFTER UPDATE OF node_uuid ON portgroups BEGIN
    UPDATE portgroups SET node_conductor_group = (SELECT conductor_group FROM nodes WHERE uuid = NEW.node_uuid),
                          node_shard = (SELECT shard FROM nodes WHERE uuid = NEW.node_uuid)
      WHERE id = NEW.id;
END;
-- Only a real change of a node's group or shard touches its ports: node
-- writes set every column, most change neither.
CREATE TRIGGER nodes_placement_to_ports AFTER UPDATE OF conductor_group, shard ON nodes
  WHEN OLD.conductor_group IS NOT NEW.conductor_group OR OLD.shard IS NOT NEW.shard BEGIN
    UPDATE ports SET node_conductor_group = NEW.conductor_group, node_shard = NEW.shard WHERE node_id = NEW.id;
    UPDATE portgroups SET node_conductor_group = NEW.conductor_group, node_shard = NEW.shard WHERE node_uuid = NEW.uuid;
END;
