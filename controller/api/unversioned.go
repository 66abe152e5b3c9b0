package api

import (
	"strings"

	"github.com/labstack/echo/v4"
)

// ironicCollections are the first path segments Ironic serves under /v1.
var ironicCollections = map[string]bool{
	"nodes": true, "ports": true, "portgroups": true, "chassis": true, "drivers": true,
	"conductors": true, "allocations": true, "deploy_templates": true, "runbooks": true,
	"volume": true, "shards": true, "lookup": true, "heartbeat": true, "continue_inspection": true,
	"events": true,
}

// defaultVersion routes a path without a version prefix to /v1, as Ironic's
// root controller does: the "bookmark" links Ironic and Kiln hand out
// (http://host/nodes/<uuid>) resolve. Only Ironic's collections are
// rewritten, so routes mounted beside /v1 (boot files, /metrics) keep theirs.
func defaultVersion(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if ironicCollections[first] {
			r.URL.Path = "/v1" + r.URL.Path
			if r.URL.RawPath != "" {
				r.URL.RawPath = "/v1" + r.URL.RawPath
			}
		}
		return next(c)
	}
}
