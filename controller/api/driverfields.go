package api

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// driverFieldsSince is the microversion from which GET /v1/drivers[/{name}]
// take ?fields= (1.77).
const driverFieldsSince = 77

// driverFields reads ?fields= of a drivers request: nil when absent, 406
// below 1.77, 400 together with detail=True (as Ironic checks it first).
func driverFields(c echo.Context, detail bool) ([]string, error) {
	raw := c.QueryParam("fields")
	if raw == "" {
		return nil, nil
	}
	if detail {
		return nil, badRequest("Can not specify ?detail=True and fields in the same request.")
	}
	if minor(c) < driverFieldsSince {
		return nil, notAcceptable()
	}
	fields := []string{}
	for f := range strings.SplitSeq(raw, ",") {
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	return fields, nil
}

// selectDriverFields keeps the fields of doc that were asked for, and its
// links; a field doc does not have (at this version, in this view: a list
// without detail has no interfaces) is a 400, as in Ironic.
func selectDriverFields(doc map[string]any, fields []string) error {
	if fields == nil {
		return nil
	}
	var invalid []string
	for _, f := range fields {
		if _, ok := doc[f]; !ok {
			invalid = append(invalid, f)
		}
	}
	if len(invalid) > 0 {
		return badRequest("Field(s) \"%s\" are not valid", strings.Join(invalid, ", "))
	}
	for k := range maps.Clone(doc) {
		if k != "links" && !slices.Contains(fields, k) {
			delete(doc, k)
		}
	}
	return nil
}

// driverDoc is a driver as a JSON object, to select fields from.
func driverDoc(v any) (map[string]any, error) {
	doc, err := toDoc(v)
	if err != nil {
		return nil, fmt.Errorf("render driver: %w", err)
	}
	return doc, nil
}
