package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// maxVIFIDLen bounds a VIF's ID (a UUID or a logical name).
const maxVIFIDLen = 255

// vifTarget is where a VIF attaches: a port group or a port (one is set).
type vifTarget struct {
	portgroup *proto.Portgroup
	port      *proto.Port
}

// vifOf reads the VIF recorded in a port's or port group's internal_info.
func vifOf(info proto.Dict) string {
	v, _ := info[proto.TenantVIFKey].(string)
	return v
}

// vifAttachedError is Ironic's VifAlreadyAttached.
func vifAttachedError(vif, kind, uuid string) *Error {
	return conflict("Unable to attach VIF because VIF %s is already attached to Ironic %s %s", vif, kind, uuid)
}

// pickVIFTarget chooses the port group or port a VIF attaches to, as
// Ironic's network interfaces do (common.get_free_port_like_object) with no
// physical network constraint: a VIF already attached is a 409; a port
// with a VIF makes its group unusable, whose free ports are then
// candidates themselves; empty groups are skipped; of the candidates, a
// port group wins over a port and a PXE-enabled port over another, each
// in the order given. portUUID or portgroupUUID (1.67) narrow the choice.
// No candidate is Ironic's NoFreePhysicalPorts, a 400.
func pickVIFTarget(vif string, ports []*proto.Port, groups []*proto.Portgroup, portUUID, portgroupUUID string) (vifTarget, error) {
	var free []vifTarget
	byGroup := map[string][]*proto.Port{}
	unusable := map[string]bool{}
	for _, p := range ports {
		if portUUID != "" && p.UUID != portUUID {
			continue
		}
		if attached := vifOf(p.InternalInfo); attached == vif {
			return vifTarget{}, vifAttachedError(vif, "Port", p.UUID)
		} else if attached != "" {
			if p.PortgroupUUID != nil {
				unusable[*p.PortgroupUUID] = true
			}
			continue
		}
		if p.PortgroupUUID == nil && portgroupUUID == "" {
			free = append(free, vifTarget{port: p})
		} else if p.PortgroupUUID != nil {
			byGroup[*p.PortgroupUUID] = append(byGroup[*p.PortgroupUUID], p)
		}
	}
	if portUUID == "" {
		for _, g := range groups {
			if portgroupUUID != "" && g.UUID != portgroupUUID {
				continue
			}
			if vifOf(g.InternalInfo) == vif {
				return vifTarget{}, vifAttachedError(vif, "Portgroup", g.UUID)
			}
			if vifOf(g.InternalInfo) != "" {
				continue
			}
			if unusable[g.UUID] {
				if portgroupUUID == "" {
					for _, p := range byGroup[g.UUID] {
						free = append(free, vifTarget{port: p})
					}
				}
			} else if len(byGroup[g.UUID]) > 0 {
				free = append(free, vifTarget{portgroup: g})
			}
		}
	}
	best := -1
	rank := func(t vifTarget) int {
		switch {
		case t.portgroup != nil:
			return 2
		case t.port.PXEEnabled:
			return 1
		}
		return 0
	}
	for i, t := range free {
		if best < 0 || rank(t) > rank(free[best]) {
			best = i
		}
	}
	if best < 0 {
		return vifTarget{}, badRequest("Unable to attach VIF %s, not enough free physical ports.", vif)
	}
	return free[best], nil
}

// nodeNetwork reads a node's ports and port groups, in creation order.
func (s *Server) nodeNetwork(ctx context.Context, nodeUUID string) ([]*proto.Port, []*proto.Portgroup, error) {
	ports, err := s.store.ListPorts(ctx, store.PortQuery{NodeUUID: nodeUUID})
	if err != nil {
		return nil, nil, err
	}
	if s.portgroupsErr != nil {
		return nil, nil, errorf(http.StatusServiceUnavailable, "portgroups are not available: %v", s.portgroupsErr)
	}
	groups, err := s.portgroups.store.List(ctx, store.Query{Filters: map[string]string{"node_uuid": nodeUUID}})
	return ports, groups, err
}

// vifNode finds the node of a VIF request: 404 below 1.28, where Ironic
// has no vifs, and for an unknown node.
func (s *Server) vifNode(c echo.Context) (*proto.Node, error) {
	if minor(c) < 28 {
		return nil, notFound("The resource could not be found.")
	}
	return s.getNodeOr404(c)
}

// listVIFs answers GET /v1/nodes/{node}/vifs: the VIFs recorded on the
// node's ports, then its port groups.
func (s *Server) listVIFs(c echo.Context) error {
	n, err := s.vifNode(c)
	if err != nil {
		return err
	}
	ports, groups, err := s.nodeNetwork(c.Request().Context(), n.UUID)
	if err != nil {
		return err
	}
	vifs := []map[string]string{}
	for _, p := range ports {
		if v := vifOf(p.InternalInfo); v != "" {
			vifs = append(vifs, map[string]string{"id": v})
		}
	}
	for _, g := range groups {
		if v := vifOf(g.InternalInfo); v != "" {
			vifs = append(vifs, map[string]string{"id": v})
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"vifs": vifs})
}

// checkVIFID is Ironic's check of a VIF ID: a UUID or a logical name.
func checkVIFID(field, id string) error {
	if _, err := uuid.Parse(id); err == nil && len(id) == 36 {
		return nil
	}
	if len(id) > maxVIFIDLen || !nameRE.MatchString(id) {
		return badRequest("Expected UUID or name for %s: %s", field, id)
	}
	return nil
}

// attachVIF answers POST /v1/nodes/{node}/vifs: under the node's lock, the
// VIF is recorded in the internal_info of the free port group or port that
// pickVIFTarget chooses, as Ironic's network interfaces record it.
func (s *Server) attachVIF(c echo.Context) error {
	n, err := s.vifNode(c)
	if err != nil {
		return err
	}
	obj, err := readJSONObject(c, "vif")
	if err != nil {
		return err
	}
	var req struct {
		ID            *string `json:"id"`
		PortUUID      string  `json:"port_uuid"`
		PortgroupUUID string  `json:"portgroup_uuid"`
	}
	if raw, ok := obj["id"]; !ok {
		return badRequest("Schema error for vif: 'id' is a required property")
	} else if err := json.Unmarshal(raw, &req.ID); err != nil || req.ID == nil {
		return badRequest("Schema error for vif: %s is not of type 'string'", raw)
	}
	if err := checkVIFID("id", *req.ID); err != nil {
		return err
	}
	// port_uuid and portgroup_uuid name the target (documented from
	// 1.67). Ironic's conductor reads them from the VIF as sent at any
	// version; only from 1.67 does its API refuse both at once, and below
	// it port_uuid wins.
	for _, k := range []struct {
		key string
		dst *string
	}{{"port_uuid", &req.PortUUID}, {"portgroup_uuid", &req.PortgroupUUID}} {
		if raw, ok := obj[k.key]; ok {
			if err := json.Unmarshal(raw, k.dst); err != nil {
				return badRequest("Schema error for vif: %s is not of type 'string'", raw)
			}
		}
	}
	if req.PortUUID != "" && req.PortgroupUUID != "" {
		if minor(c) >= 67 {
			return badRequest("Cannot specify both port_uuid and portgroup_uuid")
		}
		req.PortgroupUUID = ""
	}
	ctx := c.Request().Context()
	unlock, err := s.lockNode(ctx, n.UUID)
	if err != nil {
		return err
	}
	defer unlock()
	ports, groups, err := s.nodeNetwork(ctx, n.UUID)
	if err != nil {
		return err
	}
	target, err := pickVIFTarget(*req.ID, ports, groups, req.PortUUID, req.PortgroupUUID)
	if err != nil {
		return err
	}
	if err := s.recordVIF(ctx, target, *req.ID); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// recordVIF sets (vif != "") or clears the VIF of a port group or port.
// Clearing also drops extra.vif_port_id, as Ironic does.
func (s *Server) recordVIF(ctx context.Context, t vifTarget, vif string) error {
	set := func(info, extra proto.Dict) proto.Dict {
		if info == nil {
			info = proto.Dict{}
		}
		if vif == "" {
			delete(info, proto.TenantVIFKey)
			delete(extra, "vif_port_id")
		} else {
			info[proto.TenantVIFKey] = vif
		}
		return info
	}
	if t.portgroup != nil {
		_, err := s.portgroups.store.Update(ctx, t.portgroup.UUID, func(g *proto.Portgroup) error {
			g.InternalInfo = set(g.InternalInfo, g.Extra)
			return nil
		})
		return s.storeError(err, "Portgroup", t.portgroup.UUID)
	}
	_, err := s.store.UpdatePort(ctx, t.port.UUID, func(p *proto.Port) error {
		p.InternalInfo = set(p.InternalInfo, p.Extra)
		return nil
	})
	return s.storeError(err, "Port", t.port.UUID)
}

// detachVIF answers DELETE /v1/nodes/{node}/vifs/{vif}: under the node's
// lock, the port group or port carrying the VIF is cleared; a VIF not
// attached is Ironic's VifNotAttached, a 400.
func (s *Server) detachVIF(c echo.Context) error {
	n, err := s.vifNode(c)
	if err != nil {
		return err
	}
	vif := c.Param("vif")
	if err := checkVIFID("vif_id", vif); err != nil {
		return err
	}
	ctx := c.Request().Context()
	unlock, err := s.lockNode(ctx, n.UUID)
	if err != nil {
		return err
	}
	defer unlock()
	ports, groups, err := s.nodeNetwork(ctx, n.UUID)
	if err != nil {
		return err
	}
	var target vifTarget
	for _, g := range groups {
		if vifOf(g.InternalInfo) == vif && target.portgroup == nil {
			target.portgroup = g
		}
	}
	for _, p := range ports {
		if vifOf(p.InternalInfo) == vif && target.portgroup == nil && target.port == nil {
			target.port = p
		}
	}
	if target.portgroup == nil && target.port == nil {
		return badRequest("Unable to detach VIF %s from node %s because it is not attached to it.", vif, n.UUID)
	}
	if err := s.recordVIF(ctx, target, ""); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// portBoundToVIF refuses, as Ironic's conductor does, to delete a port that
// carries a VIF unless its node is in maintenance (409).
func (s *Server) portBoundToVIF(ctx context.Context, id string) error {
	p, err := s.store.GetPort(ctx, id)
	if err != nil {
		return s.storeError(err, "Port", id)
	}
	vif := vifOf(p.InternalInfo)
	if vif == "" {
		return nil
	}
	n, err := s.store.GetNode(ctx, p.NodeUUID)
	if err != nil {
		return s.storeError(err, "Node", p.NodeUUID)
	}
	if n.Maintenance {
		return nil
	}
	return conflict("Cannot delete the port %s as it is bound to VIF %s for use.", p.UUID, vif)
}
