package api

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// The node's other BMC actions: NMI (1.29) and indicators (1.63),
// answered synchronously like PUT …/management/boot_device; boot mode and
// secure boot changes (1.76), accepted at once (202) and carried out by
// the conductor, which records boot_mode, secure_boot or last_error. The
// API never talks to the BMC: the request goes through the node's
// conductor, under its reservation (bootdevice.go).

const (
	minorInjectNMI  = 29
	minorIndicators = 63
	minorBootMode   = 76
)

// mountManagementOps adds the routes of this file.
func (s *Server) mountManagementOps(e *echo.Echo) {
	e.PUT("/v1/nodes/:node/management/inject_nmi", s.injectNMI)
	e.GET("/v1/nodes/:node/management/indicators", s.listIndicators)
	e.GET("/v1/nodes/:node/management/indicators/:indicator", s.getIndicator)
	e.PUT("/v1/nodes/:node/management/indicators/:indicator", s.setIndicator)
	e.PUT("/v1/nodes/:node/states/boot_mode", s.setBootMode)
	e.PUT("/v1/nodes/:node/states/secure_boot", s.setSecureBoot)
}

// managementResult makes req through the conductor and turns a failure
// into Ironic's answer (400 with the BMC's words when it refused, 500
// when it failed).
func (s *Server) managementResult(c echo.Context, req proto.ManagementRequest) (proto.ManagementResult, error) {
	res, err := s.managementCall(c, req, nil)
	if err != nil {
		return res, err
	}
	return res, managementError(res)
}

func (s *Server) injectNMI(c echo.Context) error {
	if minor(c) < minorInjectNMI {
		return notFound("The resource could not be found.")
	}
	obj, err := readJSONObject(c, "inject NMI")
	if err != nil {
		return err
	}
	// Ironic's request is an empty object.
	if err := checkFields(c, "inject NMI", obj, nil, nil); err != nil {
		return err
	}
	if _, err := s.managementResult(c, proto.ManagementRequest{Op: proto.OpInjectNMI}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) listIndicators(c echo.Context) error {
	if minor(c) < minorIndicators {
		return notFound("The resource could not be found.")
	}
	res, err := s.managementResult(c, proto.ManagementRequest{Op: proto.OpGetIndicators})
	if err != nil {
		return err
	}
	ident := c.Param("node")
	out := make([]map[string]any, 0, len(res.Indicators))
	for _, ind := range res.Indicators {
		unique := ind.Name + "@" + ind.Component
		states := ind.States
		if states == nil {
			states = []string{}
		}
		out = append(out, map[string]any{
			"name": unique, "component": ind.Component, "readonly": ind.ReadOnly, "states": states,
			"links": links(c, "nodes/"+ident+"/management/indicators/"+unique),
		})
	}
	return c.JSON(http.StatusOK, map[string]any{"indicators": out})
}

// indicatorParam splits {name}@{component}, as Ironic's
// IndicatorAtComponent does (the component is after the first "@").
func indicatorParam(c echo.Context) (name, component string, err error) {
	unique := c.Param("indicator")
	name, component, ok := strings.Cut(unique, "@")
	if !ok {
		return "", "", badRequest("Malformed indicator name \"%s\"", unique)
	}
	return name, component, nil
}

func (s *Server) getIndicator(c echo.Context) error {
	if minor(c) < minorIndicators {
		return notFound("The resource could not be found.")
	}
	name, component, err := indicatorParam(c)
	if err != nil {
		return err
	}
	res, err := s.managementResult(c, proto.ManagementRequest{Op: proto.OpGetIndicator, Indicator: name, Component: component})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"state": res.IndicatorState})
}

func (s *Server) setIndicator(c echo.Context) error {
	if minor(c) < minorIndicators {
		return notFound("The resource could not be found.")
	}
	name, component, err := indicatorParam(c)
	if err != nil {
		return err
	}
	obj, err := readJSONObject(c, "indicator")
	if err != nil {
		return err
	}
	if err := checkFields(c, "indicator", obj, []string{"state"}, nil); err != nil {
		return err
	}
	var body struct {
		State *string `json:"state"`
	}
	if err := decodeInto(obj, &body, "indicator request"); err != nil {
		return err
	}
	if body.State == nil {
		return badRequest("Missing argument: \"state\"")
	}
	st, err := driver.IndicatorState(*body.State)
	if err != nil {
		return badRequest("%s", err.Error())
	}
	if _, err := s.managementResult(c, proto.ManagementRequest{Op: proto.OpSetIndicator, Indicator: name, Component: component, State: st}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// transitioning refuses a boot mode or secure boot change while the node
// moves between states, as Ironic does (its UNSTABLE_STATES).
func transitioning(n *proto.Node) error {
	if state.IsTransient(n.ProvisionState) {
		return conflict("Node is in %s state. Since node is transitioning, the boot mode will not be set as this may interfere with ongoing changes and result in erroneous modification. Try again later.", n.ProvisionState)
	}
	return nil
}

// asyncManagement records req on the node (after the node's checks) for
// its conductor and answers 202 with the node's states as Location.
func (s *Server) asyncManagement(c echo.Context, what string, req proto.ManagementRequest) error {
	res, err := s.recordManagement(c, req, func(n *proto.Node) error {
		if err := transitioning(n); err != nil {
			return err
		}
		if !driver.ManagementCan(n, req.Op) {
			return badRequest("Node %s's management interface %s cannot change its %s.", n.UUID, n.ManagementInterface, what)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.Response().Header().Set("Location", baseURL(c)+"/v1/nodes/"+res.UUID+"/states")
	return c.NoContent(http.StatusAccepted)
}

// targetOf reads the body {"target": …} of a states/boot_mode or
// states/secure_boot request.
func targetOf(c echo.Context, what string) (json.RawMessage, error) {
	obj, err := readJSONObject(c, what)
	if err != nil {
		return nil, err
	}
	if err := checkFields(c, what, obj, []string{"target"}, nil); err != nil {
		return nil, err
	}
	t, ok := obj["target"]
	if !ok {
		return nil, badRequest("Missing argument: \"target\"")
	}
	return t, nil
}

func (s *Server) setBootMode(c echo.Context) error {
	if minor(c) < minorBootMode {
		return notFound("This endpoint is supported starting with the API version 1.%d", minorBootMode)
	}
	raw, err := targetOf(c, "boot mode")
	if err != nil {
		return err
	}
	var target string
	if err := json.Unmarshal(raw, &target); err != nil || (target != driver.BootModeUEFI && target != driver.BootModeBIOS) {
		return badRequest("Invalid boot mode %s requested for node. Allowed boot modes are: %s, %s", string(raw), driver.BootModeBIOS, driver.BootModeUEFI)
	}
	return s.asyncManagement(c, "boot mode", proto.ManagementRequest{Op: proto.OpSetBootMode, BootMode: target})
}

func (s *Server) setSecureBoot(c echo.Context) error {
	if minor(c) < minorBootMode {
		return notFound("This endpoint is supported starting with the API version 1.%d", minorBootMode)
	}
	raw, err := targetOf(c, "secure boot")
	if err != nil {
		return err
	}
	var target bool
	switch strings.ToLower(strings.Trim(string(raw), `"`)) {
	case "true", "1", "yes", "on":
		target = true
	case "false", "0", "no", "off":
	default:
		return badRequest("Invalid secure_boot %s requested for node. Allowed secure_boot states are: True, False)", string(raw))
	}
	return s.asyncManagement(c, "secure boot state", proto.ManagementRequest{Op: proto.OpSetSecureBoot, SecureBoot: &target})
}
