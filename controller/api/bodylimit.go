package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// Request bodies are bounded per class of route, so that a client cannot make
// the controller buffer and decode more than a route can legitimately need.
// The classes and their defaults:
//
//	default    1 MiB   every route not named below (ports, maintenance, boot device, power …)
//	node       4 MiB   POST /v1/nodes, PATCH /v1/nodes/{node}: driver_info, properties,
//	                   instance_info, network_data and extra of one node
//	provision 64 MiB   PUT /v1/nodes/{node}/states/provision: may carry a config drive
//	                   (a gzipped, base64-encoded ISO) as Nova and Metal3 send it
//	agent     16 MiB   POST /v1/heartbeat/{node}, /v1/continue_inspection: hardware
//	                   inventory and inspection data
//
// `kiln serve --body-limit CLASS=BYTES` overrides any of them. A larger body
// is refused with 413 before it is read.
var DefaultBodyLimits = map[string]int64{
	"default":   1 << 20,
	"node":      4 << 20,
	"provision": 64 << 20,
	"agent":     16 << 20,
}

// BodyLimitClasses are the names Config.BodyLimits accepts.
func BodyLimitClasses() []string {
	out := make([]string, 0, len(DefaultBodyLimits))
	for k := range DefaultBodyLimits {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// bodyLimitClass names the class of the route echo matched.
func bodyLimitClass(method, route string) string {
	switch {
	case method == http.MethodPost && route == "/v1/nodes", method == http.MethodPatch && route == "/v1/nodes/:node":
		return "node"
	case method == http.MethodPut && route == "/v1/nodes/:node/states/provision":
		return "provision"
	case method == http.MethodPost && (route == "/v1/heartbeat/:node" || route == "/v1/continue_inspection"):
		return "agent"
	}
	return "default"
}

// bodyLimits merges overrides over the defaults, refusing unknown classes
// and non-positive sizes.
func bodyLimits(overrides map[string]int64) (map[string]int64, error) {
	out := make(map[string]int64, len(DefaultBodyLimits))
	for k, v := range DefaultBodyLimits {
		out[k] = v
	}
	for k, v := range overrides {
		if _, ok := DefaultBodyLimits[k]; !ok {
			return nil, fmt.Errorf("body limit: unknown route class %q (want one of %s)", k, strings.Join(BodyLimitClasses(), ", "))
		}
		if v <= 0 {
			return nil, fmt.Errorf("body limit for %s: %d is not a positive number of bytes", k, v)
		}
		out[k] = v
	}
	return out, nil
}

// screenRequest refuses, before any handler runs, a body larger than its
// route allows (413) and a URL that is not valid UTF-8 (400); it bounds what
// handlers can read to the limit.
func (s *Server) screenRequest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := checkRequestText(c); err != nil {
			return err
		}
		r := c.Request()
		limit := s.bodyLimits[bodyLimitClass(r.Method, c.Path())]
		if r.ContentLength > limit {
			return tooLarge(limit)
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		}
		return next(c)
	}
}

func tooLarge(limit int64) *Error {
	return errorf(http.StatusRequestEntityTooLarge, "Request body is larger than this route's limit of %d bytes.", limit)
}

// bodyReadError maps a failure to read the body: 413 past the limit, else 400.
func bodyReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(mbe.Limit)
	}
	return badRequest("Could not read the request body: %v", err)
}

// CheckBodyLimits reports whether overrides are valid for Config.BodyLimits.
func CheckBodyLimits(overrides map[string]int64) error {
	_, err := bodyLimits(overrides)
	return err
}
