package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/api/jsonpatch"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Ironic's schema limits of port group fields.
const (
	maxPortgroupModeLen     = 255
	maxPortgroupCategoryLen = 80
	// defaultPortgroupMode is Ironic's [DEFAULT]default_portgroup_mode.
	defaultPortgroupMode = "active-backup"
)

// portgroupAPI is /v1/portgroups as Ironic serves it (1.23): a node's link
// aggregate, its ports listed under it, addressed by UUID or name.
func (s *Server) portgroupAPI() resource[proto.Portgroup] {
	return resource[proto.Portgroup]{
		kind:         "Portgroup",
		name:         "portgroups",
		sinceVersion: 23,
		minVersion:   proto.PortgroupFieldMinVersion,
		listFields:   []string{"uuid", "address", "name", "links"},
		createFields: []string{"address", "category", "extra", "mode", "name", "node_uuid", "physical_network", "properties", "standalone_ports_supported", "uuid"},
		required:     []string{"node_uuid"},
		patchable:    []string{"address", "category", "extra", "mode", "name", "node_uuid", "physical_network", "properties", "standalone_ports_supported"},
		mandatory:    []string{"node_uuid", "mode"},
		filters: map[string]filter{
			"node":    {store: "node_uuid", resolve: s.filterNode},
			"address": {store: "address", check: normalizeMAC},
			// The node's shard (1.106) and conductor group (1.99), lists.
			"shard":            {store: "shard", minVersion: 106, check: shardList},
			"conductor_groups": {store: "conductor_group", minVersion: 99, check: conductorGroupList},
			"conductor_group":  {store: "conductor_group", minVersion: 99, check: conductorGroupList},
		},
		exclusive:    []string{"node", "address", "shard", "conductor_groups"}, // conductor_group: the same store filter
		exclusiveMsg: "Filtering by node, address, or shard simultaneously is not supported.",
		byName:       "name",
		fresh: func() proto.Portgroup {
			mode := defaultPortgroupMode
			return proto.Portgroup{Extra: proto.Dict{}, InternalInfo: proto.Dict{}, Properties: proto.Dict{}, Mode: &mode, StandalonePortsSupported: true}
		},
		validate: validatePortgroup,
		keep: func(from, to *proto.Portgroup) {
			to.InternalInfo = from.InternalInfo
		},
		links: func(c echo.Context, pg *proto.Portgroup, shown map[string]bool) {
			pg.Links = links(c, "portgroups/"+pg.UUID)
			if shown["ports"] {
				pg.Ports = links(c, "portgroups/"+pg.UUID+"/ports")
			}
		},
		inUse: func(ident string) *Error {
			return badRequest("Cannot complete the requested action because portgroup %s contains ports.", ident)
		},
		lock: func(ctx context.Context, pg *proto.Portgroup) (func(), error) {
			unlock, err := s.lockNode(ctx, pg.NodeUUID)
			if e := (*Error)(nil); errors.As(err, &e) && e.Code == http.StatusNotFound {
				return nil, badRequest("Node %s could not be found.", pg.NodeUUID)
			}
			return unlock, err
		},
		taken: func(err error, pg *proto.Portgroup) *Error {
			switch {
			case errors.Is(err, store.ErrDuplicatePortgroupName):
				return conflict("A portgroup with name %s already exists.", pyStr(pg.Name))
			case errors.Is(err, store.ErrDuplicatePortgroupMAC):
				return conflict("A portgroup with MAC address %s already exists.", pyStr(pg.Address))
			}
			return nil
		},
		check: s.checkPortgroup,
	}
}

// validatePortgroup checks and normalizes the client's fields.
func validatePortgroup(_ context.Context, pg *proto.Portgroup) error {
	if pg.Extra == nil {
		pg.Extra = proto.Dict{}
	}
	if pg.Properties == nil {
		pg.Properties = proto.Dict{}
	}
	if pg.InternalInfo == nil {
		pg.InternalInfo = proto.Dict{}
	}
	if pg.Mode == nil || *pg.Mode == "" {
		mode := defaultPortgroupMode
		pg.Mode = &mode
	}
	if u, err := uuid.Parse(pg.NodeUUID); err != nil || len(pg.NodeUUID) != 36 {
		return badRequest("Expected UUID for node_uuid: %s", pg.NodeUUID)
	} else {
		pg.NodeUUID = u.String()
	}
	if pg.Address != nil {
		if *pg.Address == "" {
			pg.Address = nil
		} else {
			mac, err := normalizeMAC(*pg.Address)
			if err != nil {
				return err
			}
			pg.Address = &mac
		}
	}
	if pg.Name != nil {
		if *pg.Name == "" {
			pg.Name = nil
		} else if err := validateName(*pg.Name); err != nil {
			return badRequest("Cannot create portgroup with invalid name '%s'", *pg.Name)
		}
	}
	for _, f := range []struct {
		name string
		v    *string
		max  int
	}{{"mode", pg.Mode, maxPortgroupModeLen}, {"physical_network", pg.PhysicalNetwork, maxPhysicalNetworkLen}, {"category", pg.Category, maxPortgroupCategoryLen}} {
		if err := checkLen("portgroup", f.name, f.v, f.max); err != nil {
			return err
		}
	}
	return nil
}

// checkPortgroup applies Ironic's rules that involve other objects: the
// node must exist; moving a group to another node needs it empty and the
// node enrolled, manageable, inspecting or in maintenance; a group with
// PXE-booting or VIF-carrying ports cannot stop supporting standalone
// ports. It runs under the node's lock.
func (s *Server) checkPortgroup(ctx context.Context, old, pg *proto.Portgroup) error {
	if pg == nil {
		return nil // delete: the ports' foreign key refuses a group with ports
	}
	if old == nil || old.NodeUUID != pg.NodeUUID {
		if _, err := s.store.GetNode(ctx, pg.NodeUUID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return badRequest("Node %s could not be found.", pg.NodeUUID)
			}
			return err
		}
	}
	if old == nil {
		return nil
	}
	ports, err := s.store.ListPorts(ctx, store.PortQuery{PortgroupUUID: pg.UUID})
	if err != nil {
		return err
	}
	if old.NodeUUID != pg.NodeUUID {
		n, err := s.store.GetNode(ctx, old.NodeUUID)
		if err != nil {
			return err
		}
		if !slices.Contains([]proto.ProvisionState{proto.StateEnroll, proto.StateInspecting, proto.StateInspectWait, proto.StateManageable}, n.ProvisionState) && !n.Maintenance {
			return conflict("Portgroup %s can not be associated to node %s unless the node is in a enroll, inspecting, inspect wait, manageable state or in maintenance mode. Current state is '%s'.",
				pg.UUID, n.UUID, n.ProvisionState)
		}
		if len(ports) > 0 {
			return badRequest("Portgroup %s can not be associated with node %s because there are ports associated with this portgroup.", pg.UUID, n.UUID)
		}
	}
	if old.StandalonePortsSupported && !pg.StandalonePortsSupported {
		for _, p := range ports {
			var reason []string
			if p.PXEEnabled {
				reason = append(reason, "'pxe_enabled' is set to True")
			}
			if vif, _ := p.InternalInfo[proto.TenantVIFKey].(string); vif != "" {
				reason = append(reason, "VIF "+vif+" is attached to this port")
			}
			if len(reason) > 0 {
				return conflict("standalone_ports_supported can not be set to False, because the port group %s contains port with %s", pg.UUID, strings.Join(reason, ", "))
			}
		}
	}
	return nil
}

// filterNode resolves a node filter (UUID or name) to the node's UUID;
// an unknown node is Ironic's 404.
func (s *Server) filterNode(ctx context.Context, ident string) (string, error) {
	n, err := s.store.GetNode(ctx, ident)
	if err != nil {
		return "", s.storeError(err, "Node", ident)
	}
	return n.UUID, nil
}

// nodePortgroups lists a node's port groups: GET /v1/nodes/{node}/portgroups
// and …/detail (1.24).
func (s *Server) nodePortgroups(detail bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if minor(c) < 24 {
			return notFound("The resource could not be found.")
		}
		if s.portgroupsErr != nil {
			return errorf(http.StatusServiceUnavailable, "portgroups are not available: %v", s.portgroupsErr)
		}
		n, err := s.getNodeOr404(c)
		if err != nil {
			return err
		}
		if c.QueryParam("node") != "" {
			return badRequest("Filtering by node, address, or shard simultaneously is not supported.")
		}
		return s.portgroups.listOf(c, detail, "/v1/nodes/"+n.UUID+"/portgroups", map[string]string{"node_uuid": n.UUID})
	}
}

// portgroupPorts lists a port group's ports: GET /v1/portgroups/{id}/ports
// and …/detail (1.24).
func (s *Server) portgroupPorts(detail bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if minor(c) < 24 {
			return notFound("The resource could not be found.")
		}
		if s.portgroupsErr != nil {
			return errorf(http.StatusServiceUnavailable, "portgroups are not available: %v", s.portgroupsErr)
		}
		id, err := s.portgroups.ident(c)
		if err != nil {
			return err
		}
		if _, err := s.portgroups.store.Get(c.Request().Context(), id); err != nil {
			return s.portgroups.failed(err, c.Param("id"))
		}
		path := "/v1/portgroups/" + id + "/ports"
		if detail {
			if c.QueryParam("detail") != "" {
				return badRequest("Parameter 'detail' is not allowed on %s/detail", path)
			}
			return s.listPortsIn(c, "", id, true, path+"/detail")
		}
		d, err := parseBool(c, "detail")
		if err != nil {
			return err
		}
		return s.listPortsIn(c, "", id, d != nil && *d, path)
	}
}

// portsPortgroup resolves the portgroup list filter of /v1/ports (1.24,
// UUID or name) to a UUID.
func (s *Server) portsPortgroup(c echo.Context) (string, error) {
	v := c.QueryParam("portgroup")
	if v == "" {
		return "", nil
	}
	if minor(c) < 24 {
		return "", notAcceptable()
	}
	if s.portgroupsErr != nil {
		return "", errorf(http.StatusServiceUnavailable, "portgroups are not available: %v", s.portgroupsErr)
	}
	return s.portgroups.lookup(c.Request().Context(), v)
}

// checkPortMembership applies Ironic's rules to a port that is, or is
// becoming, a member of a port group: the group exists (400 otherwise) and
// is on the port's node; a PXE-enabled port needs a group that supports
// standalone ports; all ports of a group share one physical network (the
// group's own when it has no ports). old is the port before a patch (nil
// on create). The caller holds the group's node lock.
func (s *Server) checkPortMembership(ctx context.Context, old, p *proto.Port) error {
	if p.PortgroupUUID == nil {
		return nil
	}
	if s.portgroupsErr != nil {
		return errorf(http.StatusServiceUnavailable, "portgroups are not available: %v", s.portgroupsErr)
	}
	pg, err := s.portgroups.store.Get(ctx, *p.PortgroupUUID)
	if errors.Is(err, store.ErrNotFound) {
		return badRequest("Portgroup %s could not be found.", *p.PortgroupUUID)
	}
	if err != nil {
		return err
	}
	if pg.NodeUUID != p.NodeUUID {
		return badRequest("Port can not be added to a portgroup belonging to a different node.")
	}
	joined := old == nil || !sameRef(old.PortgroupUUID, p.PortgroupUUID)
	if p.PXEEnabled && !bool(pg.StandalonePortsSupported) && (joined || !old.PXEEnabled) {
		return conflict("Port group %s doesn't support standalone ports. This port cannot be created as a member of that portgroup as the port's 'pxe_enabled' field was set to True.", pg.UUID)
	}
	if !joined && sameRef(old.PhysicalNetwork, p.PhysicalNetwork) {
		return nil
	}
	members, err := s.store.ListPorts(ctx, store.PortQuery{PortgroupUUID: pg.UUID})
	if err != nil {
		return err
	}
	var physnets []*string
	for _, m := range members {
		if m.UUID != p.UUID && !slices.ContainsFunc(physnets, func(n *string) bool { return sameRef(n, m.PhysicalNetwork) }) {
			physnets = append(physnets, m.PhysicalNetwork)
		}
	}
	if len(physnets) > 1 {
		return errorf(http.StatusInternalServerError, "Port group %s has member ports with inconsistent physical networks (%s). All ports in a port group must have the same physical network.",
			pg.UUID, strings.Join(slices.Collect(func(yield func(string) bool) {
				for _, n := range physnets {
					if !yield(pyStr(n)) {
						return
					}
				}
			}), ", "))
	}
	if len(physnets) == 0 {
		if pg.PhysicalNetwork == nil {
			return nil
		}
		physnets = append(physnets, pg.PhysicalNetwork)
	}
	if !sameRef(physnets[0], p.PhysicalNetwork) {
		return conflict("Port with physical network %s cannot become a member of port group %s which has ports in physical network %s.",
			pyStr(p.PhysicalNetwork), pg.UUID, pyStr(physnets[0]))
	}
	return nil
}

// sameRef compares optional strings by value.
func sameRef(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// pyStr shows an optional string as Ironic's messages do (None for none).
func pyStr(s *string) string {
	if s == nil {
		return "None"
	}
	return *s
}

// lockNode takes the node's reservation in this controller's name, as
// Ironic's conductor takes a node's lock for changes of its ports, port
// groups and VIFs, and returns its release. A node held by a conductor at
// work is waited for up to s.lockWait, then answered 409 NodeLocked.
func (s *Server) lockNode(ctx context.Context, nodeUUID string) (func(), error) {
	name := s.conductor
	if name == "" {
		name = "kiln-api"
	}
	deadline := time.Now().Add(s.lockWait)
	pause := 10 * time.Millisecond
	for {
		n, err := s.store.Reserve(ctx, nodeUUID, name)
		if err == nil {
			return func() {
				// The request may be gone; the release must still happen.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := s.store.Release(rctx, n.UUID, name); err != nil {
					s.log.Warn("release node after an API change", "node", n.UUID, "err", err)
				}
			}, nil
		}
		var locked *store.LockedError
		if !errors.As(err, &locked) {
			return nil, s.storeError(err, "Node", nodeUUID)
		}
		if !s.waitForLock(ctx, deadline, &pause) {
			return nil, nodeLocked(nodeUUID, locked.Holder)
		}
	}
}

// routePortgroups mounts /v1/portgroups, the ports of a group, a node's
// groups and its VIFs.
func (s *Server) routePortgroups(e *echo.Echo) {
	pg := s.portgroupAPI()
	s.portgroups = &pg
	var st *store.Resources[proto.Portgroup]
	st, s.portgroupsErr = store.NewResources(s.store, store.PortgroupResource)
	s.portgroups.mount(e, st, s.portgroupsErr)
	e.GET("/v1/portgroups/:id/ports", s.portgroupPorts(false))
	e.GET("/v1/portgroups/:id/ports/detail", s.portgroupPorts(true))
	e.GET("/v1/nodes/:node/portgroups", s.nodePortgroups(false))
	e.GET("/v1/nodes/:node/portgroups/detail", s.nodePortgroups(true))
	e.GET("/v1/nodes/:node/vifs", s.listVIFs)
	e.POST("/v1/nodes/:node/vifs", s.attachVIF)
	e.DELETE("/v1/nodes/:node/vifs/:vif", s.detachVIF)
}

// normalizePortgroupRef checks a port's portgroup_uuid: "" is none,
// anything else a UUID (400 otherwise, as Ironic's validator answers).
func normalizePortgroupRef(p *proto.Port) error {
	if p.PortgroupUUID == nil || *p.PortgroupUUID == "" {
		p.PortgroupUUID = nil
		return nil
	}
	u, err := uuid.Parse(*p.PortgroupUUID)
	if err != nil || len(*p.PortgroupUUID) != 36 {
		return badRequest("Expected UUID for portgroup_uuid: %s", *p.PortgroupUUID)
	}
	id := u.String()
	p.PortgroupUUID = &id
	return nil
}

// createPortIn stores a new port; one that joins a port group does so
// under its node's lock, after Ironic's membership rules.
func (s *Server) createPortIn(ctx context.Context, p *proto.Port) error {
	if err := normalizePortgroupRef(p); err != nil {
		return err
	}
	if p.PortgroupUUID == nil {
		return s.store.CreatePort(ctx, p)
	}
	unlock, err := s.lockNode(ctx, p.NodeUUID)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.checkPortMembership(ctx, nil, p); err != nil {
		return err
	}
	err = s.store.CreatePort(ctx, p)
	if errors.Is(err, store.ErrMissingReference) {
		return badRequest("Portgroup %s could not be found.", *p.PortgroupUUID)
	}
	return err
}

// lockPortMembership takes, for a port patch that may change what port
// group the port is in or what that group checks (its group, node,
// physical network, PXE flag), the lock of the node the port ends up on;
// other patches need none.
func (s *Server) lockPortMembership(ctx context.Context, id string, ops []jsonpatch.Op) (func(), error) {
	touches := false
	for _, op := range ops {
		for _, path := range []string{op.Path, op.From} {
			switch patchRoot(path) {
			case "portgroup_uuid", "node_uuid", "physical_network", "pxe_enabled":
				touches = true
			}
			if touches {
				break
			}
		}
	}
	if !touches {
		return func() {}, nil
	}
	p, err := s.store.GetPort(ctx, id)
	if err != nil {
		return nil, s.storeError(err, "Port", id)
	}
	var updated proto.Port
	if err := applyPatch(p, proto.Port{Address: p.Address, NodeUUID: p.NodeUUID, PXEEnabled: true}, ops, &updated, "port"); err != nil {
		return nil, err
	}
	if err := normalizePortgroupRef(&updated); err != nil {
		return nil, err
	}
	if updated.PortgroupUUID == nil && p.PortgroupUUID == nil {
		return func() {}, nil
	}
	node := p.NodeUUID
	if updated.NodeUUID != p.NodeUUID {
		if node, err = s.portNodeUUID(ctx, updated.NodeUUID); err != nil {
			return nil, err
		}
	}
	return s.lockNode(ctx, node)
}
