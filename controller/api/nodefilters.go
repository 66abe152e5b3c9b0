package api

import (
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
)

// maxDescriptionFilter bounds ?description_contains= (a node's
// description is at most maxDescriptionLen characters: a longer
// substring matches nothing anyway).
const maxDescriptionFilter = maxDescriptionLen

// nodeListFilters reads the node list filters on conductor (1.49),
// description_contains (1.51), retired (1.61) and lessee (1.65) into q;
// each is 406 below the microversion of the field it reads. project (the
// nodes a project owns or leases) has no microversion: Ironic takes it at
// every version, as the filter its policy applies for project-scoped
// requests.
func nodeListFilters(c echo.Context, q *store.NodeQuery) error {
	for _, f := range []struct {
		param string
		minV  int
		dst   *string
	}{
		{"conductor", 49, &q.Conductor},
		{"description_contains", 51, &q.DescriptionContains},
		{"lessee", 65, &q.Lessee},
		{"project", 1, &q.Project},
	} {
		v := c.QueryParam(f.param)
		if v == "" {
			continue
		}
		if minor(c) < f.minV {
			return notAcceptable()
		}
		if len(v) > maxDescriptionFilter {
			return badRequest("Invalid value for %s: at most %d characters", f.param, maxDescriptionFilter)
		}
		*f.dst = v
	}
	retired, err := parseBool(c, "retired")
	if err != nil {
		return err
	}
	if retired != nil && minor(c) < 61 {
		return notAcceptable()
	}
	q.Retired = retired
	return nil
}
