package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/raid"
	"github.com/kilnhq/kiln/proto"
)

// Node sub-resources that need no hardware: the console (1.1), the target
// RAID configuration (1.12) and vendor passthru discovery (1.1), as
// Ironic answers them for the interfaces Kiln has.

// unsupported is Ironic's answer when a node's interface does not offer an
// extension (a no-console, no-raid or no-vendor interface).
func unsupported(driverName, extension string) *Error {
	return badRequest("Driver %s does not support %s (disabled or not implemented).", driverName, extension)
}

// getConsole is GET /v1/nodes/{id}/states/console: whether the console is
// on and, when it is, how to reach it (nothing to reach for the fake
// console, as Ironic's fake console says {}).
func (s *Server) getConsole(c echo.Context) error {
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	if strings.HasPrefix(n.ConsoleInterface, "no-") {
		return unsupported(n.Driver, "console")
	}
	var info any
	if n.ConsoleEnabled {
		info = map[string]any{}
	}
	return c.JSON(http.StatusOK, map[string]any{"console_enabled": n.ConsoleEnabled, "console_info": info})
}

// setConsole is PUT /v1/nodes/{id}/states/console {"enabled": bool}: 202,
// the node's console_enabled set (the fake console starts and stops at
// once), and a Location to the console's state.
func (s *Server) setConsole(c echo.Context) error {
	obj, err := readJSONObject(c, "console")
	if err != nil {
		return err
	}
	if err := checkFields(c, "console", obj, []string{"enabled"}, nil); err != nil {
		return err
	}
	raw, ok := obj["enabled"]
	if !ok {
		return badRequest("Missing argument: \"enabled\"")
	}
	enabled, err := parseBoolJSON(raw)
	if err != nil {
		return badRequest("Invalid value for enabled: %s", err.Error())
	}
	_, err = s.updateUnlocked(c.Request().Context(), c.Param("node"), func(n *proto.Node) error {
		if n.Reservation != nil {
			return nodeLocked(n.UUID, *n.Reservation)
		}
		if strings.HasPrefix(n.ConsoleInterface, "no-") {
			return unsupported(n.Driver, "console")
		}
		if n.ConsoleEnabled != enabled {
			n.ConsoleEnabled = enabled
			n.LastError = nil
		}
		return nil
	})
	if err != nil {
		return s.storeError(err, "Node", c.Param("node"))
	}
	c.Response().Header().Set("Location", baseURL(c)+"/v1/nodes/"+c.Param("node")+"/states/console")
	return c.NoContent(http.StatusAccepted)
}

// parseBoolJSON reads a JSON boolean, or a string Ironic reads as one.
func parseBoolJSON(raw json.RawMessage) (bool, error) {
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return b, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch strings.ToLower(s) {
		case "true", "1", "yes", "on", "t", "y":
			return true, nil
		case "false", "0", "no", "off", "f", "n":
			return false, nil
		}
	}
	return false, &Error{Code: http.StatusBadRequest, Msg: string(raw) + " is not a boolean"}
}

// setRAID is PUT /v1/nodes/{id}/states/raid (1.12): the body is the target
// RAID configuration, checked against Ironic's RAID schema; {} clears it.
// 204; 404 when the node's RAID interface offers no RAID, as Ironic.
func (s *Server) setRAID(c echo.Context) error {
	if minor(c) < 12 {
		return notAcceptable()
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var cfg map[string]any
	if err := d.Decode(&cfg); err != nil || cfg == nil {
		return badRequest("Invalid target_raid_config: expected a JSON object")
	}
	if err := raid.Validate(cfg); err != nil {
		return badRequest("%s", err.Error())
	}
	_, err = s.updateUnlocked(c.Request().Context(), c.Param("node"), func(n *proto.Node) error {
		if n.Reservation != nil {
			return nodeLocked(n.UUID, *n.Reservation)
		}
		if strings.HasPrefix(n.RAIDInterface, "no-") {
			e := unsupported(n.Driver, "raid")
			e.Code = http.StatusNotFound
			return e
		}
		n.TargetRAIDConfig = proto.Dict(cfg)
		return nil
	})
	if err != nil {
		return s.storeError(err, "Node", c.Param("node"))
	}
	return c.NoContent(http.StatusNoContent)
}

// nodeVendorMethods is GET /v1/nodes/{id}/vendor_passthru/methods: the
// vendor methods of the node's vendor interface. Kiln's interfaces have
// none, so {}; a no-vendor interface offers no vendor passthru at all.
func (s *Server) nodeVendorMethods(c echo.Context) error {
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	if strings.HasPrefix(n.VendorInterface, "no-") {
		return unsupported(n.Driver, "vendor")
	}
	return c.JSON(http.StatusOK, map[string]any{})
}

// nodeVendorPassthru is <verb> /v1/nodes/{id}/vendor_passthru?method=X:
// a method name is required, and no method exists, as Ironic answers for
// an unknown one.
func (s *Server) nodeVendorPassthru(c echo.Context) error {
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	method := passthruMethod(c)
	if method == "" {
		return badRequest("Method not specified")
	}
	if strings.HasPrefix(n.VendorInterface, "no-") {
		return unsupported(n.Driver, "vendor")
	}
	return badRequest("No handler for method %s", truncate(method, 100))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// subresourceRoutes mounts the node sub-resources, driver and conductor
// endpoints of this file and driverinfo.go.
func (s *Server) subresourceRoutes(e *echo.Echo) {
	e.GET("/v1/nodes/:node/states/console", s.getConsole)
	e.PUT("/v1/nodes/:node/states/console", s.setConsole)
	e.PUT("/v1/nodes/:node/states/raid", s.setRAID)
	e.GET("/v1/nodes/:node/vendor_passthru/methods", s.nodeVendorMethods)
	e.GET("/v1/drivers/:driver/properties", s.driverProperties)
	e.GET("/v1/drivers/:driver/raid/logical_disk_properties", s.raidProperties)
	e.GET("/v1/drivers/:driver/vendor_passthru/methods", s.driverVendorMethods)
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		// The method in the query (?method=X) or as the last path segment,
		// which is how python-ironicclient calls it.
		e.Add(m, "/v1/nodes/:node/vendor_passthru", s.nodeVendorPassthru)
		e.Add(m, "/v1/nodes/:node/vendor_passthru/:method", s.nodeVendorPassthru)
		e.Add(m, "/v1/drivers/:driver/vendor_passthru", s.driverVendorPassthru)
		e.Add(m, "/v1/drivers/:driver/vendor_passthru/:method", s.driverVendorPassthru)
	}
	e.GET("/v1/conductors/:hostname", s.getConductor)
}

// passthruMethod is the vendor method a passthru call names.
func passthruMethod(c echo.Context) string {
	if m := c.Param("method"); m != "" {
		return m
	}
	return c.QueryParam("method")
}
