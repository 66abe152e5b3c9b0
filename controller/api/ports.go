package api

import (
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/api/jsonpatch"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

var portCreateFields = []string{"address", "node_uuid", "extra", "local_link_connection", "pxe_enabled", "physical_network", "is_smartnic", "name", "portgroup_uuid", "uuid",
	"node_ident", "description", "vendor", "category", "available_for_dynamic_portgroup"}

var portPatchable = []string{"address", "available_for_dynamic_portgroup", "category", "description", "extra", "is_smartnic", "local_link_connection", "name", "node_uuid", "physical_network", "portgroup_uuid", "pxe_enabled", "vendor"}

var portSortable = sortKeys(store.PortSortKeys)

// normalizeMAC checks a MAC address and returns its canonical lower-case form.
func normalizeMAC(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return "", badRequest("Expected a MAC address but received %s.", s)
	}
	return strings.ToLower(hw.String()), nil
}

func (s *Server) createPort(c echo.Context) error {
	obj, err := readJSONObject(c, "port")
	if err != nil {
		return err
	}
	if err := checkFields(c, "port", obj, portCreateFields, portCreateMinVersion); err != nil {
		return err
	}
	nodeIdent, err := popNodeIdent(obj)
	if err != nil {
		return err
	}
	if err := checkStrictPortBools(obj); err != nil {
		return err
	}
	p := proto.PortDefaults()
	if err := decodeInto(obj, &p, "port"); err != nil {
		return err
	}
	if p.Address == "" {
		return badRequest("Schema error for port: 'address' is a required property")
	}
	ctx := c.Request().Context()
	switch {
	case nodeIdent != "" && p.NodeUUID != "":
		return badRequest("Schema error for port: exactly one of 'node_ident' and 'node_uuid' is required, not both")
	case nodeIdent != "":
		if p.NodeUUID, err = s.portNodeIdent(ctx, nodeIdent); err != nil {
			return err
		}
	case p.NodeUUID == "":
		return badRequest("Schema error for port: 'node_uuid' is a required property")
	default:
		if p.NodeUUID, err = s.portNodeUUID(ctx, p.NodeUUID); err != nil {
			return err
		}
	}
	if p.UUID == "" {
		p.UUID = uuid.NewString()
	} else if u, err := uuid.Parse(p.UUID); err != nil {
		return badRequest("Expected a UUID but received %s.", p.UUID)
	} else {
		p.UUID = u.String()
	}
	if err := completePort(&p); err != nil {
		return err
	}
	p.CreatedAt = proto.Now()
	if err := s.createPortIn(ctx, &p); err != nil {
		ident := p.UUID
		if errors.Is(err, store.ErrDuplicateMAC) {
			ident = p.Address
		}
		if errors.Is(err, store.ErrDuplicatePortName) && p.Name != nil {
			ident = *p.Name
		}
		return s.storeError(err, "Port", ident)
	}
	c.Response().Header().Set("Location", baseURL(c)+"/v1/ports/"+p.UUID)
	return sendPort(c, http.StatusCreated, &p, nil)
}

// completePort validates the client-settable port fields and fills defaults.
func completePort(p *proto.Port) error {
	mac, err := normalizeMAC(p.Address)
	if err != nil {
		return err
	}
	p.Address = mac
	if p.Extra == nil {
		p.Extra = proto.Dict{}
	}
	if p.InternalInfo == nil {
		p.InternalInfo = proto.Dict{}
	}
	if p.LocalLinkConnection == nil {
		p.LocalLinkConnection = proto.Dict{}
	}
	for k := range p.LocalLinkConnection {
		switch k {
		case "switch_id", "port_id", "switch_info", "hostname", "network_type":
		default:
			return badRequest("Invalid local_link_connection: unexpected key %q", k)
		}
	}
	if p.Name != nil {
		if err := validateName(*p.Name); err != nil {
			return err
		}
	}
	return validatePortStrings(p)
}

func (s *Server) getPort(c echo.Context) error {
	fields, err := parseFields(c, portFieldNames, proto.PortFieldMinVersion)
	if err != nil {
		return err
	}
	id, err := s.portIdent(c)
	if err != nil {
		return err
	}
	p, err := s.store.GetPort(c.Request().Context(), id)
	if err != nil {
		return s.storeError(err, "Port", id)
	}
	return sendPort(c, http.StatusOK, p, fields)
}

func (s *Server) listPorts(c echo.Context) error {
	detail, err := parseBool(c, "detail")
	if err != nil {
		return err
	}
	return s.listPortsCommon(c, "", detail != nil && *detail, "/v1/ports")
}

func (s *Server) listPortsDetail(c echo.Context) error {
	return s.listPortsCommon(c, "", true, "/v1/ports/detail")
}

func (s *Server) listNodePorts(c echo.Context) error {
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	return s.listPortsCommon(c, n.UUID, false, "/v1/nodes/"+n.UUID+"/ports")
}

func (s *Server) listNodePortsDetail(c echo.Context) error {
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	return s.listPortsCommon(c, n.UUID, true, "/v1/nodes/"+n.UUID+"/ports/detail")
}

func (s *Server) listPortsCommon(c echo.Context, nodeUUID string, detail bool, path string) error {
	return s.listPortsIn(c, nodeUUID, "", detail, path)
}

// listPortsIn lists ports, of a node and of a port group when those are
// given (the latter otherwise from the portgroup filter).
func (s *Server) listPortsIn(c echo.Context, nodeUUID, portgroupUUID string, detail bool, path string) error {
	if portgroupUUID == "" {
		var err error
		if portgroupUUID, err = s.portsPortgroup(c); err != nil {
			return err
		}
	}
	p, err := parseListParams(c, portSortable)
	if err != nil {
		return err
	}
	fields, err := parseFields(c, portFieldNames, proto.PortFieldMinVersion)
	if err != nil {
		return err
	}
	if fields == nil && !detail {
		fields = proto.PortDefaultListFields
	}
	q := store.PortQuery{NodeUUID: nodeUUID, PortgroupUUID: portgroupUUID, Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir,
		Summary: isDefaultPortFields(fields)}
	ctx := c.Request().Context()
	for _, param := range []string{"node_uuid", "node"} {
		if v := c.QueryParam(param); v != "" {
			n, err := s.store.GetNode(ctx, v)
			if err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return c.JSON(http.StatusOK, map[string]any{"ports": []any{}})
				}
				return err
			}
			q.NodeUUID = n.UUID
		}
	}
	if v := c.QueryParam("address"); v != "" {
		mac, err := normalizeMAC(v)
		if err != nil {
			return err
		}
		q.Address = mac
	}
	if err := portPlacementFilters(c, &q); err != nil {
		return err
	}
	if docs, ok := store.PortDocsOf(s.store); ok && !q.Summary {
		return s.sendPortDocs(c, docs, q, p, path, fields)
	}
	ports, err := s.store.ListPorts(ctx, q)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) && p.marker != "" {
			return badRequest("Marker %s could not be found.", p.marker)
		}
		return err
	}
	next := ""
	if len(ports) > 0 {
		next = nextLink(c, path, p, len(ports), ports[len(ports)-1].UUID)
	}
	plan := planFields(portWireFields, minor(c), fields)
	return sendList(c, "ports", len(ports), next, func(w *objectWriter, i int) error {
		return w.port(c, ports[i], plan)
	})
}

func (s *Server) patchPort(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	ops, err := jsonpatch.ParseOps(body)
	if err != nil {
		return badRequest("Invalid patch: %v", err)
	}
	if err := checkPatchPaths(c, ops, portPatchable, proto.PortFieldMinVersion); err != nil {
		return err
	}
	if err := checkMandatoryRemovals(ops, portMandatory); err != nil {
		return err
	}
	if err := checkStrictPortBoolOps(ops); err != nil {
		return err
	}
	id, err := s.portIdent(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	unlock, err := s.lockPortMembership(ctx, id, ops)
	if err != nil {
		return err
	}
	defer unlock()
	var group *string // the group the port is to join
	p, err := s.store.UpdatePort(ctx, id, func(p *proto.Port) error {
		var updated proto.Port
		blank := proto.PortDefaults()
		blank.Address, blank.NodeUUID = p.Address, p.NodeUUID
		if err := applyPatch(p, blank, ops, &updated, "port"); err != nil {
			return err
		}
		if err := completePort(&updated); err != nil {
			return err
		}
		if updated.NodeUUID != p.NodeUUID {
			if updated.NodeUUID, err = s.portNodeUUID(ctx, updated.NodeUUID); err != nil {
				return err
			}
		}
		updated.UUID, updated.CreatedAt, updated.UpdatedAt, updated.InternalInfo = p.UUID, p.CreatedAt, p.UpdatedAt, p.InternalInfo
		if err := normalizePortgroupRef(&updated); err != nil {
			return err
		}
		group = updated.PortgroupUUID
		if err := s.checkPortMembership(ctx, p, &updated); err != nil {
			return err
		}
		*p = updated
		return nil
	})
	if errors.Is(err, store.ErrDuplicatePortName) {
		return errPortNameTaken(patchedName(ops))
	}
	if errors.Is(err, store.ErrMissingReference) {
		return badRequest("Portgroup %s could not be found.", pyStr(group))
	}
	if err != nil {
		return s.storeError(err, "Port", id)
	}
	return sendPort(c, http.StatusOK, p, nil)
}

func (s *Server) deletePort(c echo.Context) error {
	id, err := s.portIdent(c)
	if err != nil {
		return err
	}
	if err := s.portBoundToVIF(c.Request().Context(), id); err != nil {
		return err
	}
	if err := s.store.DeletePort(c.Request().Context(), id); err != nil {
		return s.storeError(err, "Port", id)
	}
	return c.NoContent(http.StatusNoContent)
}
