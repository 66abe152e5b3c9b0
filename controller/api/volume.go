package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// volumeVersion is the microversion of /v1/volume.
const volumeVersion = 32

// volumeDeleteStates are the provision states in which a powered-on
// node's volume connectors and targets may still be deleted (Ironic's
// DELETE_ALLOWED_STATES).
var volumeDeleteStates = []proto.ProvisionState{proto.StateManageable, proto.StateEnroll, proto.StateAdoptFailed}

// volumeConnectorsAPI is /v1/volume/connectors.
func (s *Server) volumeConnectorsAPI() resource[proto.VolumeConnector] {
	return resource[proto.VolumeConnector]{
		kind:         "Volume connector",
		name:         "connectors",
		path:         "volume/connectors",
		sinceVersion: volumeVersion,
		listFields:   []string{"uuid", "node_uuid", "type", "connector_id", "links"},
		createFields: []string{"connector_id", "extra", "node_uuid", "type", "uuid"},
		required:     []string{"connector_id", "node_uuid", "type"},
		patchable:    []string{"connector_id", "extra", "node_uuid", "type"},
		mandatory:    []string{"connector_id", "node_uuid", "type"},
		filters:      map[string]filter{"node": {store: "node_uuid", check: s.volumeNodeFilter}},
		fresh:        func() proto.VolumeConnector { return proto.VolumeConnector{Extra: proto.Dict{}} },
		validate: func(ctx context.Context, v *proto.VolumeConnector) error {
			if v.Extra == nil {
				v.Extra = proto.Dict{}
			}
			for _, f := range []struct {
				name string
				v    string
				max  int
			}{{"type", v.Type, 32}, {"connector_id", v.ConnectorID, 255}} {
				if err := checkLen("volume connector", f.name, &f.v, f.max); err != nil {
					return err
				}
			}
			return s.volumeNode(ctx, &v.NodeUUID)
		},
		guard: func(ctx context.Context, v *proto.VolumeConnector, action string) error {
			return s.volumeGuard(ctx, v.NodeUUID, "volume connector "+action, action == "deletion")
		},
		links: func(c echo.Context, v *proto.VolumeConnector, _ map[string]bool) {
			v.Links = links(c, "volume/connectors/"+v.UUID)
		},
		taken: func(err error, v *proto.VolumeConnector) *Error {
			if errors.Is(err, store.ErrConnectorTaken) {
				return conflict("A volume connector with type %s and connector ID %s already exists.", v.Type, v.ConnectorID)
			}
			return nil
		},
	}
}

// volumeTargetsAPI is /v1/volume/targets.
func (s *Server) volumeTargetsAPI() resource[proto.VolumeTarget] {
	return resource[proto.VolumeTarget]{
		kind:         "Volume target",
		name:         "targets",
		path:         "volume/targets",
		sinceVersion: volumeVersion,
		listFields:   []string{"uuid", "node_uuid", "volume_type", "boot_index", "volume_id", "links"},
		createFields: []string{"boot_index", "extra", "node_uuid", "properties", "volume_id", "volume_type", "uuid"},
		required:     []string{"boot_index", "node_uuid", "volume_id", "volume_type"},
		patchable:    []string{"boot_index", "extra", "node_uuid", "properties", "volume_id", "volume_type"},
		mandatory:    []string{"boot_index", "node_uuid", "volume_id", "volume_type"},
		filters:      map[string]filter{"node": {store: "node_uuid", check: s.volumeNodeFilter}},
		fresh:        func() proto.VolumeTarget { return proto.VolumeTarget{Extra: proto.Dict{}, Properties: proto.Dict{}} },
		validate: func(ctx context.Context, v *proto.VolumeTarget) error {
			if v.Extra == nil {
				v.Extra = proto.Dict{}
			}
			if v.Properties == nil {
				v.Properties = proto.Dict{}
			}
			if v.BootIndex < 0 || v.BootIndex > 1<<31-1 {
				return badRequest("Invalid volume target: boot_index %d is out of range", v.BootIndex)
			}
			for _, f := range []struct {
				name string
				v    string
				max  int
			}{{"volume_type", v.VolumeType, 64}, {"volume_id", v.VolumeID, 36}} {
				if err := checkLen("volume target", f.name, &f.v, f.max); err != nil {
					return err
				}
			}
			return s.volumeNode(ctx, &v.NodeUUID)
		},
		guard: func(ctx context.Context, v *proto.VolumeTarget, action string) error {
			return s.volumeGuard(ctx, v.NodeUUID, "volume target "+action, action == "deletion")
		},
		links: func(c echo.Context, v *proto.VolumeTarget, _ map[string]bool) {
			v.Links = links(c, "volume/targets/"+v.UUID)
		},
		taken: func(err error, v *proto.VolumeTarget) *Error {
			if errors.Is(err, store.ErrBootIndexTaken) {
				return conflict("A volume target with boot index '%d' for the same node already exists.", v.BootIndex)
			}
			return nil
		},
	}
}

// volumeNode checks a connector's or target's node_uuid: a UUID naming a
// node (400 otherwise, as Ironic answers), normalized.
func (s *Server) volumeNode(ctx context.Context, id *string) error {
	u, err := uuid.Parse(*id)
	if err != nil || len(*id) != 36 {
		return badRequest("Expected a UUID for node_uuid, but received %s.", *id)
	}
	*id = u.String()
	if _, err := s.store.GetNode(ctx, *id); errors.Is(err, store.ErrNotFound) {
		return badRequest("Invalid input for field/attribute node_uuid. Value: '%s'.", *id)
	} else if err != nil {
		return err
	}
	return nil
}

// volumeNodeFilter turns ?node=<UUID or name> into the node's UUID.
func (s *Server) volumeNodeFilter(ident string) (string, error) {
	n, err := s.store.GetNode(context.Background(), ident)
	if err != nil {
		return "", s.storeError(err, "Node", ident)
	}
	return n.UUID, nil
}

// volumeGuard applies Ironic's rule for changing a node's volume: the node
// must be powered off (a deletion is also allowed in manageable, enroll
// and adopt failed), and not locked by a conductor.
func (s *Server) volumeGuard(ctx context.Context, nodeUUID, action string, deletion bool) error {
	n, err := s.store.GetNode(ctx, nodeUUID)
	if err != nil {
		return s.storeError(err, "Node", nodeUUID)
	}
	if n.Reservation != nil {
		return nodeLocked(n.UUID, *n.Reservation)
	}
	if n.PowerState != nil && *n.PowerState == proto.PowerOff {
		return nil
	}
	if deletion {
		for _, st := range volumeDeleteStates {
			if n.ProvisionState == st {
				return nil
			}
		}
	}
	ps := "None"
	if n.PowerState != nil {
		ps = string(*n.PowerState)
	}
	return badRequest("The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", action, n.UUID, ps)
}

// volumeLinks is GET /v1/volume and GET /v1/nodes/{id}/volume.
func (s *Server) volumeLinks(c echo.Context) error {
	if minor(c) < volumeVersion {
		return notFound("The resource could not be found.")
	}
	prefix := "volume/"
	if c.Param("node") != "" {
		n, err := s.getNodeOr404(c)
		if err != nil {
			return err
		}
		prefix = "nodes/" + n.UUID + "/volume/"
	}
	base := baseURL(c)
	l := func(p string) []proto.Link {
		return []proto.Link{{Href: base + "/v1/" + p, Rel: "self"}, {Href: base + "/" + p, Rel: "bookmark"}}
	}
	return c.JSON(http.StatusOK, proto.Volume{Links: l(prefix), Connectors: l(prefix + "connectors"), Targets: l(prefix + "targets")})
}

// nodeVolumeList lists r's objects of one node: GET
// /v1/nodes/{id}/volume/connectors and …/targets.
func nodeVolumeList[T any](s *Server, r *resource[T], what string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if minor(c) < volumeVersion {
			return notFound("The resource could not be found.")
		}
		if c.QueryParam("node") != "" {
			return badRequest("Malformed request URI.")
		}
		n, err := s.getNodeOr404(c)
		if err != nil {
			return err
		}
		detail, err := parseBool(c, "detail")
		if err != nil {
			return err
		}
		return r.listIn(c, detail != nil && *detail, "/v1/nodes/"+n.UUID+"/volume/"+what, map[string]string{"node_uuid": n.UUID})
	}
}

// mountVolume routes /v1/volume and the node's volume.
func (s *Server) mountVolume(e *echo.Echo) {
	vc := s.volumeConnectorsAPI()
	s.steps.connectors = &vc
	st, err := store.NewResources(s.store, store.VolumeConnectorResource)
	vc.mount(e, st, err)
	vt := s.volumeTargetsAPI()
	s.steps.targets = &vt
	tst, err := store.NewResources(s.store, store.VolumeTargetResource)
	vt.mount(e, tst, err)

	e.GET("/v1/volume", s.volumeLinks)
	e.GET("/v1/volume/", s.volumeLinks)
	e.GET("/v1/nodes/:node/volume", s.volumeLinks)
	e.GET("/v1/nodes/:node/volume/", s.volumeLinks)
	e.GET("/v1/nodes/:node/volume/connectors", nodeVolumeList(s, &vc, "connectors"))
	e.GET("/v1/nodes/:node/volume/targets", nodeVolumeList(s, &vt, "targets"))
	malformed := func(c echo.Context) error {
		if minor(c) < volumeVersion {
			return notFound("The resource could not be found.")
		}
		return badRequest("Malformed request URI.")
	}
	for _, coll := range []string{"connectors", "targets"} {
		e.POST("/v1/nodes/:node/volume/"+coll, malformed)
		e.GET("/v1/nodes/:node/volume/"+coll+"/:id", malformed)
		e.PATCH("/v1/nodes/:node/volume/"+coll+"/:id", malformed)
		e.DELETE("/v1/nodes/:node/volume/"+coll+"/:id", malformed)
	}
}
