package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
)

// Shards (1.82) and parent/child nodes (1.83): GET /v1/shards, GET
// /v1/nodes/{id}/children and the node list filters that go with them.

// maxShardFilter bounds ?shard=a,b,… (each value a shard name).
const maxShardFilter = 100

// nodeTreeFilters reads the list filters of microversions 1.82 (shard,
// sharded), 1.83 (parent_node, include_children) and 1.104 (instance_name)
// into q; each is 406 below its microversion. Child nodes are left out
// unless parent_node or include_children asks for them, at any
// microversion, as Ironic's database layer does.
func nodeTreeFilters(c echo.Context, q *store.NodeQuery) error {
	if v := c.QueryParam("shard"); v != "" {
		if minor(c) < 82 {
			return notAcceptable()
		}
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s == "" || len(s) > 255 {
				return badRequest("Invalid value for shard: %q", v)
			}
			q.Shards = append(q.Shards, s)
		}
		if len(q.Shards) > maxShardFilter {
			return badRequest("Invalid value for shard: at most %d shards", maxShardFilter)
		}
	}
	sharded, err := parseBool(c, "sharded")
	if err != nil {
		return err
	}
	if sharded != nil && minor(c) < 82 {
		return notAcceptable()
	}
	q.Sharded = sharded
	include, err := parseBool(c, "include_children")
	if err != nil {
		return err
	}
	parent := c.QueryParam("parent_node")
	if (include != nil || parent != "") && minor(c) < 83 {
		return notAcceptable()
	}
	if len(parent) > 255 {
		return badRequest("Invalid value for parent_node: too long")
	}
	q.ParentNode = parent
	q.NoChildren = parent == "" && (include == nil || !*include)
	if v := c.QueryParam("instance_name"); v != "" {
		if minor(c) < 104 {
			return notAcceptable()
		}
		if len(v) > 255 {
			return badRequest("Invalid value for instance_name: too long")
		}
		q.InstanceName = v
	}
	return nil
}

// listShards is GET /v1/shards: every shard with its node count, largest
// first; 404 below 1.82 as the endpoint did not exist.
func (s *Server) listShards(c echo.Context) error {
	if minor(c) < 82 {
		return notFound("The API version does not allow shards")
	}
	shards, err := store.Shards(c.Request().Context(), s.store)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"shards": shards})
}

// nodeChildren is GET /v1/nodes/{id}/children (1.83): the UUIDs of the
// nodes whose parent_node is this one, and a link to list them in full.
func (s *Server) nodeChildren(c echo.Context) error {
	if minor(c) < 83 {
		return notFound("The resource could not be found.")
	}
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	kids, err := store.Children(c.Request().Context(), s.store, n.UUID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{
		"children": kids,
		"links":    links(c, "nodes/?parent_node="+n.UUID),
	})
}
