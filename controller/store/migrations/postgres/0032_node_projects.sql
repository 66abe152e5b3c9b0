-- GET /v1/nodes?project=P keeps the nodes that P owns or leases (owner = P
-- OR lessee = P, as Ironic filters). An OR of two columns cannot be read
-- from one index in list order, so each node's projects are kept, by
-- triggers, as rows of node_projects: the list seeks (project, node_id)
-- and reads the nodes by id in order. The rows are the database's alone:
-- no write of Kiln's sets them.
CREATE TABLE node_projects (
    project TEXT   COLLATE "C" NOT NULL,
    node_id BIGINT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    PRIMARY KEY (project, node_id)
);
CREATE INDEX node_projects_node ON node_projects (node_id);
INSERT INTO node_projects (project, node_id)
  SELECT owner, id FROM nodes WHERE owner <> ''
  UNION SELECT lessee, id FROM nodes WHERE lessee <> ''
  ON CONFLICT DO NOTHING;

CREATE FUNCTION kiln_node_projects() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM node_projects WHERE node_id = NEW.id;
    END IF;
    INSERT INTO node_projects (project, node_id)
      SELECT p, NEW.id FROM (VALUES (NEW.owner), (NEW.lessee)) AS v (p) WHERE p <> ''
      ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER nodes_projects_insert AFTER INSERT ON nodes
  FOR EACH ROW EXECUTE FUNCTION kiln_node_projects();
-- Node writes set every column; only a real change of owner or lessee
-- touches node_projects.
CREATE TRIGGER nodes_projects_update AFTER UPDATE OF owner, doc ON nodes
  FOR EACH ROW WHEN (OLD.owner IS DISTINCT FROM NEW.owner OR OLD.lessee IS DISTINCT FROM NEW.lessee)
  EXECUTE FUNCTION kiln_node_projects();
