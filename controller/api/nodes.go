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

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// nodeCreateFields are the keys POST /v1/nodes accepts.
var nodeCreateFields = func() []string {
	f := []string{
		"driver", "uuid", "name", "driver_info", "properties", "extra", "instance_info",
		"instance_uuid", "resource_class", "conductor_group", "chassis_uuid", "automated_clean",
		"owner", "lessee", "description", "network_data", "retired", "retired_reason", "shard",
		"parent_node", "disable_power_off", "protected", "protected_reason", "instance_name",
	}
	for _, i := range driver.Interfaces {
		f = append(f, i+"_interface")
	}
	return f
}()

// nodePatchable are the root fields PATCH may change; everything else is
// read-only (Ironic's list, in its order).
var nodePatchable = func() []string {
	f := []string{
		"automated_clean", "chassis_uuid", "conductor_group", "description", "disable_power_off",
		"driver", "driver_info", "extra", "instance_info", "instance_name", "instance_uuid", "lessee", "maintenance",
		"name", "network_data", "owner", "parent_node", "properties", "protected", "protected_reason",
		"resource_class", "retired", "retired_reason", "shard",
	}
	for _, i := range driver.Interfaces {
		f = append(f, i+"_interface")
	}
	slices.Sort(f)
	return f
}()

// nodeSortable are the sort keys the store can order by (indexed columns).
var nodeSortable = sortKeys(store.NodeSortKeys)

// getNodeOr404 loads a node by UUID or name with Ironic's 404 text.
func (s *Server) getNodeOr404(c echo.Context) (*proto.Node, error) {
	ident := c.Param("node")
	n, err := s.store.GetNode(c.Request().Context(), ident)
	if err != nil {
		return nil, s.storeError(err, "Node", ident)
	}
	return n, nil
}

// storeError maps store failures onto Ironic's status codes.
func (s *Server) storeError(err error, kind, ident string) error {
	var locked *store.LockedError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("%s %s could not be found.", kind, ident)
	case errors.As(err, &locked):
		return conflict("Node %s is locked by host %s, please retry after the current operation is completed.", ident, locked.Holder)
	case errors.Is(err, store.ErrDuplicateName):
		return conflict("A node with name %s already exists.", ident)
	case errors.Is(err, store.ErrDuplicateUUID):
		return conflict("A %s with UUID %s already exists.", strings.ToLower(kind), ident)
	case errors.Is(err, store.ErrDuplicateMAC):
		return conflict("A port with MAC address %s already exists.", ident)
	case errors.Is(err, store.ErrDuplicatePortName):
		return conflict("A port with name %s already exists.", ident)
	case errors.Is(err, store.ErrMissingReference):
		// Checked before the write; this is a chassis deleted meanwhile.
		return badRequest("%s %s refers to a chassis that no longer exists.", kind, ident)
	}
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return err
}

func (s *Server) listNodes(c echo.Context) error {
	detail, err := parseBool(c, "detail")
	if err != nil {
		return err
	}
	if detail != nil && minor(c) < 43 {
		return notAcceptable()
	}
	return s.listNodesCommon(c, detail != nil && *detail, "/v1/nodes")
}

func (s *Server) listNodesDetail(c echo.Context) error {
	if c.QueryParam("detail") != "" {
		return badRequest("Parameter 'detail' is not allowed on /v1/nodes/detail")
	}
	return s.listNodesCommon(c, true, "/v1/nodes/detail")
}

func (s *Server) listNodesCommon(c echo.Context, detail bool, path string) error {
	return s.listNodesOf(c, detail, path, "")
}

// listNodesOf lists nodes, those of one chassis when chassis is set.
func (s *Server) listNodesOf(c echo.Context, detail bool, path, chassis string) error {
	p, err := parseListParams(c, nodeSortable)
	if err != nil {
		return err
	}
	fields, err := parseFields(c, nodeFieldNames, proto.NodeFieldMinVersion)
	if err != nil {
		return err
	}
	if fields != nil && detail {
		return badRequest("Can not specify ?detail=True and fields in the same request.")
	}
	if fields == nil && !detail {
		fields = proto.NodeDefaultListFields
	}
	q := store.NodeQuery{Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir,
		Summary: fields != nil && isDefaultNodeFields(fields), ChassisUUID: chassis}
	for _, f := range []struct {
		param string
		minV  int
		dst   *string
	}{
		{"provision_state", 9, &q.ProvisionState},
		{"driver", 16, &q.Driver},
		{"resource_class", 21, &q.ResourceClass},
		{"conductor_group", 46, &q.ConductorGroup},
		{"instance_uuid", 1, &q.InstanceUUID},
		{"owner", 50, &q.Owner},
		{"fault", 42, &q.Fault},
		{"chassis_uuid", 1, &q.ChassisUUID},
	} {
		v := c.QueryParam(f.param)
		if v == "" {
			continue
		}
		if minor(c) < f.minV {
			return notAcceptable()
		}
		*f.dst = v
	}
	if chassis != "" {
		q.ChassisUUID = chassis // the URL's chassis, whatever the query says
	}
	if err := nodeTreeFilters(c, &q); err != nil {
		return err
	}
	if err := nodeListFilters(c, &q); err != nil {
		return err
	}
	if err := checkFault(q.Fault); err != nil {
		return err
	}
	if q.ProvisionState != "" && !state.IsState(proto.ProvisionState(q.ProvisionState)) {
		return badRequest("Invalid value for provision_state: %s", q.ProvisionState)
	}
	if q.Maintenance, err = parseBool(c, "maintenance"); err != nil {
		return err
	}
	if q.Associated, err = parseBool(c, "associated"); err != nil {
		return err
	}
	plan := nodePlan(c, fields)
	list := s.listNodeViews
	if q.Summary {
		list = s.listNodeSummaries
	}
	if ok, err := list(c, q, p, path, plan); ok {
		return err
	}
	nodes, err := s.store.ListNodes(c.Request().Context(), q)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) && p.marker != "" {
			return badRequest("Marker %s could not be found.", p.marker)
		}
		return err
	}
	next := ""
	if len(nodes) > 0 {
		next = nextLink(c, path, p, len(nodes), nodes[len(nodes)-1].UUID)
	}
	return sendList(c, "nodes", len(nodes), next, func(w *objectWriter, i int) error {
		return w.node(c, nodes[i], plan)
	})
}

func (s *Server) getNode(c echo.Context) error {
	fields, err := parseFields(c, nodeFieldNames, proto.NodeFieldMinVersion)
	if err != nil {
		return err
	}
	if ok, err := s.getNodeView(c, fields); ok {
		return err
	}
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	return sendNode(c, http.StatusOK, n, fields)
}

func (s *Server) createNode(c echo.Context) error {
	obj, err := readJSONObject(c, "node")
	if err != nil {
		return err
	}
	if err := checkFields(c, "node", obj, nodeCreateFields, proto.NodeFieldMinVersion); err != nil {
		return err
	}
	var n proto.Node
	if err := decodeInto(obj, &n, "node"); err != nil {
		return err
	}
	if n.Driver == "" {
		return badRequest("Schema error for node: 'driver' is a required property")
	}
	if n.UUID == "" {
		n.UUID = uuid.NewString()
	} else if u, err := uuid.Parse(n.UUID); err != nil {
		return badRequest("Expected a UUID but received %s.", n.UUID)
	} else {
		n.UUID = u.String()
	}
	if err := s.nodeChassis(c.Request().Context(), &n); err != nil {
		return err
	}
	if err := completeNode(&n); err != nil {
		return err
	}
	if err := s.resolveParentNode(c.Request().Context(), &n); err != nil {
		return err
	}
	n.ProvisionState = proto.StateEnroll
	if minor(c) < 11 {
		// Before 1.11 new nodes went straight to available.
		n.ProvisionState = proto.StateAvailable
	}
	n.CreatedAt = proto.Now()
	if s.conductor != "" {
		cond := s.conductor
		n.Conductor = &cond
	}
	ctx := c.Request().Context()
	if err := s.store.CreateNode(ctx, &n); err != nil {
		ident := n.UUID
		if errors.Is(err, store.ErrDuplicateName) && n.Name != nil {
			ident = *n.Name
		}
		return s.storeError(err, "Node", ident)
	}
	s.history(c, n.UUID, "INFO", "Node created with driver "+n.Driver)
	c.Response().Header().Set("Location", baseURL(c)+"/v1/nodes/"+n.UUID)
	return sendNode(c, http.StatusCreated, &n, nil)
}

// completeNode checks the fields a client may set and fills in defaults: the
// driver and its interfaces, the name, and empty objects where Ironic shows {}.
func completeNode(n *proto.Node) error {
	hw, ok := driver.Lookup(n.Driver)
	if !ok {
		return badRequest("No valid host was found. Reason: No conductor service registered which supports driver %s for conductor group \"%s\".", n.Driver, n.ConductorGroup)
	}
	if n.Name != nil {
		if err := validateName(*n.Name); err != nil {
			return err
		}
	}
	if err := validateNodeStrings(n); err != nil {
		return err
	}
	for _, iface := range driver.Interfaces {
		p := interfaceField(n, iface)
		if *p == "" {
			*p = hw.Default(iface)
			continue
		}
		if err := hw.Check(iface, *p); err != nil {
			return badRequest("%s", err.Error())
		}
	}
	if n.InstanceUUID != nil {
		u, err := uuid.Parse(*n.InstanceUUID)
		if err != nil {
			return badRequest("Expected a UUID for instance_uuid but received %s.", *n.InstanceUUID)
		}
		v := u.String()
		n.InstanceUUID = &v
	}
	for _, d := range []*proto.Dict{&n.DriverInfo, &n.DriverInternalInfo, &n.InstanceInfo, &n.Properties,
		&n.Extra, &n.CleanStep, &n.DeployStep, &n.ServiceStep, &n.RAIDConfig, &n.TargetRAIDConfig, &n.NetworkData} {
		if *d == nil {
			*d = proto.Dict{}
		}
	}
	if n.Traits == nil {
		n.Traits = []string{}
	}
	return nil
}

// interfaceField returns a pointer to the node's "<iface>_interface" field.
func interfaceField(n *proto.Node, iface string) *string {
	switch iface {
	case "bios":
		return &n.BIOSInterface
	case "boot":
		return &n.BootInterface
	case "console":
		return &n.ConsoleInterface
	case "deploy":
		return &n.DeployInterface
	case "firmware":
		return &n.FirmwareInterface
	case "inspect":
		return &n.InspectInterface
	case "management":
		return &n.ManagementInterface
	case "network":
		return &n.NetworkInterface
	case "power":
		return &n.PowerInterface
	case "raid":
		return &n.RAIDInterface
	case "rescue":
		return &n.RescueInterface
	case "storage":
		return &n.StorageInterface
	case "vendor":
		return &n.VendorInterface
	}
	panic("unknown interface " + iface)
}

func (s *Server) deleteNode(c echo.Context) error {
	ctx := c.Request().Context()
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	deadline, pause := time.Now().Add(s.lockWait), 10*time.Millisecond
	for n.Reservation != nil && s.waitForLock(ctx, deadline, &pause) {
		if n, err = s.getNodeOr404(c); err != nil {
			return err
		}
	}
	if n.Reservation != nil {
		return nodeLocked(n.UUID, *n.Reservation)
	}
	if err := deleteAllowed(n); err != nil {
		return err
	}
	if err := s.store.DeleteNode(ctx, n.UUID); err != nil {
		return s.storeError(err, "Node", n.UUID)
	}
	s.orphanAllocation(ctx, n)
	return c.NoContent(http.StatusNoContent)
}

// history records an event in the node's history; a failure is logged, never
// fatal to the request that caused it.
func (s *Server) history(c echo.Context, nodeUUID, severity, event string) {
	// The change it records is made: a client that hangs up now must not
	// cancel its history event.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 30*time.Second)
	defer cancel()
	err := s.store.AddHistory(ctx, nodeUUID, proto.HistoryEvent{
		Severity: severity, Event: secrets.Scrub(event), EventType: "api", Conductor: s.conductor,
	})
	if err != nil {
		s.log.Warn("record node history", "node", nodeUUID, "err", err)
	}
}
