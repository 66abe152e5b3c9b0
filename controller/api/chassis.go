package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// maxChassisDescriptionLen is Ironic's schema limit (and column width).
const maxChassisDescriptionLen = 255

// chassisAPI is /v1/chassis as Ironic serves it: description and extra,
// nodes grouped under it by their chassis_uuid.
var chassisAPI = resource[proto.Chassis]{
	kind:         "Chassis",
	name:         "chassis",
	listFields:   []string{"uuid", "description", "links"},
	createFields: []string{"description", "extra", "uuid"},
	patchable:    []string{"description", "extra"},
	fresh:        func() proto.Chassis { return proto.Chassis{Extra: proto.Dict{}} },
	validate: func(_ context.Context, ch *proto.Chassis) error {
		if ch.Extra == nil {
			ch.Extra = proto.Dict{}
		}
		return checkLen("chassis", "description", ch.Description, maxChassisDescriptionLen)
	},
	links: func(c echo.Context, ch *proto.Chassis, shown map[string]bool) {
		ch.Links = links(c, "chassis/"+ch.UUID)
		if shown["nodes"] {
			ch.Nodes = links(c, "chassis/"+ch.UUID+"/nodes")
		}
	},
	inUse: func(ident string) *Error {
		return badRequest("Cannot complete the requested action because chassis %s contains nodes.", ident)
	},
}

// chassisNodes lists the nodes of a chassis: GET /v1/chassis/{id}/nodes
// and …/nodes/detail.
func (s *Server) chassisNodes(detail bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.chassisErr != nil {
			return errorf(http.StatusServiceUnavailable, "chassis are not available: %v", s.chassisErr)
		}
		id, err := s.chassis.ident(c)
		if err != nil {
			return err
		}
		if _, err := s.chassis.store.Get(c.Request().Context(), id); err != nil {
			return s.chassis.failed(err, id)
		}
		path := "/v1/chassis/" + id + "/nodes"
		if detail {
			if c.QueryParam("detail") != "" {
				return badRequest("Parameter 'detail' is not allowed on %s/detail", path)
			}
			path += "/detail"
		} else {
			d, err := parseBool(c, "detail")
			if err != nil {
				return err
			}
			if d != nil && minor(c) < 43 {
				return notAcceptable()
			}
			detail = d != nil && *d
		}
		return s.listNodesOf(c, detail, path, id)
	}
}

// nodeChassis checks a node's chassis_uuid: empty means none, anything
// else must name an existing chassis (400 otherwise, as Ironic answers).
func (s *Server) nodeChassis(ctx context.Context, n *proto.Node) error {
	if n.ChassisUUID == nil || *n.ChassisUUID == "" {
		n.ChassisUUID = nil
		return nil
	}
	if s.chassisErr != nil {
		return errorf(http.StatusServiceUnavailable, "chassis are not available: %v", s.chassisErr)
	}
	_, err := s.chassis.store.Get(ctx, *n.ChassisUUID)
	if errors.Is(err, store.ErrNotFound) {
		return badRequest("Chassis %s could not be found.", *n.ChassisUUID)
	}
	return err
}
