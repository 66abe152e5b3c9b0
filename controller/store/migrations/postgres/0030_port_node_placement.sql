-- Port and port group lists filter by their node's conductor group (1.99)
-- and shard (ports 1.82, port groups 1.106). Each row carries a copy of its
-- node's two fields, kept by triggers, so that those lists seek an index
-- on (copy, id) in list order instead of joining every port with its node.
-- The copies are the database's alone: the documents do not hold them and
-- no write of Kiln's sets them.
ALTER TABLE ports ADD COLUMN node_conductor_group TEXT COLLATE "C";
ALTER TABLE ports ADD COLUMN node_shard TEXT COLLATE "C";
ALTER TABLE portgroups ADD COLUMN node_conductor_group TEXT COLLATE "C";
ALTER TABLE portgroups ADD COLUMN node_shard TEXT COLLATE "C";
UPDATE ports SET node_conductor_group = nodes.conductor_group, node_shard = nodes.shard
  FROM nodes WHERE nodes.id = ports.node_id;
UPDATE portgroups SET node_conductor_group = nodes.conductor_group, node_shard = nodes.shard
  FROM nodes WHERE nodes.uuid = portgroups.node_uuid;
CREATE INDEX ports_node_conductor_group ON ports (node_conductor_group, id);
CREATE INDEX ports_node_shard ON ports (node_shard, id) WHERE node_shard IS NOT NULL;
CREATE INDEX portgroups_node_conductor_group ON portgroups (node_conductor_group, id);
CREATE INDEX portgroups_node_shard ON portgroups (node_shard, id) WHERE node_shard IS NOT NULL;

CREATE FUNCTION kiln_port_node_placement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT conductor_group, shard INTO NEW.node_conductor_group, NEW.node_shard FROM nodes WHERE id = NEW.node_id;
    RETURN NEW;
END
$$;
CREATE TRIGGER ports_node_placement BEFORE INSERT OR UPDATE OF node_id ON ports
  FOR EACH ROW EXECUTE FUNCTION kiln_port_node_placement();

CREATE FUNCTION kiln_portgroup_node_placement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT conductor_group, shard INTO NEW.node_conductor_group, NEW.node_shard FROM nodes WHERE uuid = NEW.node_uuid;
    RETURN NEW;
END
$$;
CREATE TRIGGER portgroups_node_placement BEFORE INSERT OR UPDATE OF node_uuid ON portgroups
  FOR EACH ROW EXECUTE FUNCTION kiln_portgroup_node_placement();

-- Only a real change of a node's group or shard touches its ports: node
-- writes set every column, most change neither.
CREATE FUNCTION kiln_node_placement_to_ports() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ports SET node_conductor_group = NEW.conductor_group, node_shard = NEW.shard WHERE node_id = NEW.id;
    UPDATE portgroups SET node_conductor_group = NEW.conductor_group, node_shard = NEW.shard WHERE node_uuid = NEW.uuid;
    RETURN NULL;
END
$$;
CREATE TRIGGER nodes_placement_to_ports AFTER UPDATE OF conductor_group, shard ON nodes
  FOR EACH ROW WHEN (OLD.conductor_group IS DISTINCT FROM NEW.conductor_group OR OLD.shard IS DISTINCT FROM NEW.shard)
  EXECUTE FUNCTION kiln_node_placement_to_ports();
