package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

func (s *Server) getStates(c echo.Context) error {
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	st := proto.NodeStates{
		ConsoleEnabled: n.ConsoleEnabled, LastError: n.LastError, PowerState: n.PowerState,
		ProvisionState: n.ProvisionState, TargetPowerState: n.TargetPowerState,
		TargetProvisionState: n.TargetProvisionState, ProvisionUpdatedAt: n.ProvisionUpdatedAt,
		RAIDConfig: n.RAIDConfig, TargetRAIDConfig: n.TargetRAIDConfig, BootMode: n.BootMode, SecureBoot: n.SecureBoot,
	}
	doc, err := toDoc(st)
	if err != nil {
		return err
	}
	filterDoc(doc, proto.NodeFieldMinVersion, minor(c), nil)
	return c.JSON(http.StatusOK, doc)
}

var provisionFields = []string{"target", "configdrive", "clean_steps", "deploy_steps", "service_steps", "rescue_password", "disable_ramdisk", "runbook"}

func (s *Server) setProvisionState(c echo.Context) error {
	obj, err := readJSONObject(c, "provision state")
	if err != nil {
		return err
	}
	if err := checkFields(c, "provision state", obj, provisionFields, nil); err != nil {
		return err
	}
	var req proto.ProvisionRequest
	if err := decodeInto(obj, &req, "provision state request"); err != nil {
		return err
	}
	if err := checkProvisionBody(minor(c), &req); err != nil {
		return err
	}
	ident := c.Param("node")
	runbook, err := s.provisionRunbook(c, &req)
	if err != nil {
		return err
	}
	var from proto.ProvisionState
	n, err := s.updateRecording(c, ident, "INFO", func(n *proto.Node) (string, error) {
		from = n.ProvisionState
		t, err := provisionTransition(n, req.Target, minor(c))
		if err != nil {
			return "", err
		}
		if n.Reservation != nil {
			return "", nodeLocked(n.UUID, *n.Reservation)
		}
		if err := applyRunbook(n, runbook, &req, minor(c) >= runbookTraitsSince); err != nil {
			return "", err
		}
		recordProvisionRequest(n, req, t)
		return "Provision request \"" + string(req.Target) + "\" from state \"" + string(from) + "\"", nil
	})
	if err != nil {
		return s.storeError(err, "Node", ident)
	}
	s.log.Info("provision request", "node", n.UUID, "verb", req.Target, "from", from, "to", n.ProvisionState)
	s.notify(n.UUID)
	c.Response().Header().Set("Location", baseURL(c)+"/v1/nodes/"+n.UUID+"/states")
	return c.NoContent(http.StatusAccepted)
}

// checkProvisionBody validates the extra body of a provision request against
// its verb and the microversion, before any node is touched.
func checkProvisionBody(minor int, req *proto.ProvisionRequest) error {
	if req.Target == "" {
		return badRequest("Schema error for provision state: 'target' is a required property")
	}
	v := req.Target
	if req.ConfigDrive != nil {
		if v != proto.VerbActive && v != proto.VerbDeploy && v != proto.VerbRebuild {
			return badRequest("Adding a config drive is only supported when setting provision state to active, deploy or rebuild")
		}
		if v == proto.VerbRebuild && minor < 35 {
			return notAcceptable()
		}
		switch req.ConfigDrive.(type) {
		case string:
		case map[string]any:
			if minor < 56 {
				return notAcceptable()
			}
		default:
			return badRequest("Invalid configdrive: expected a string or an object")
		}
	}
	if req.CleanSteps != nil && v != proto.VerbClean {
		return badRequest("\"clean_steps\" is only valid when setting target provision state to clean")
	}
	if v == proto.VerbClean {
		if req.CleanSteps == nil && req.Runbook == "" {
			return badRequest("\"clean_steps\" is required when setting target provision state to clean")
		}
		if err := checkSteps("clean_steps", req.CleanSteps, false); err != nil {
			return err
		}
	}
	if req.DeploySteps != nil {
		if minor < 69 {
			return notAcceptable()
		}
		if v != proto.VerbActive && v != proto.VerbDeploy && v != proto.VerbRebuild {
			return badRequest("\"deploy_steps\" is only valid when setting target provision state to active, deploy or rebuild")
		}
		if err := checkSteps("deploy_steps", req.DeploySteps, true); err != nil {
			return err
		}
	}
	if v == proto.VerbService {
		if req.ServiceSteps == nil && req.Runbook == "" {
			return badRequest("\"service_steps\" is required when setting target provision state to service")
		}
		if err := checkSteps("service_steps", req.ServiceSteps, false); err != nil {
			return err
		}
	} else if req.ServiceSteps != nil {
		return badRequest("\"service_steps\" is only valid when setting target provision state to service")
	}
	if v == proto.VerbRescue && req.RescuePassword == "" {
		return badRequest("A non-empty \"rescue_password\" is required when setting target provision state to rescue")
	}
	if err := checkDisableRamdisk(minor, req); err != nil {
		return err
	}
	if req.Runbook != "" && minor < 92 {
		return notAcceptable()
	}
	return nil
}

// checkSteps validates user steps: interface and step names, args an object,
// and (for deploy steps) an integer priority.
func checkSteps(what string, steps []proto.Dict, needPriority bool) error {
	ifaces := []string{"bios", "deploy", "firmware", "management", "power", "raid", "vendor"}
	for i, st := range steps {
		iface, _ := st["interface"].(string)
		if !slices.Contains(ifaces, iface) {
			return badRequest("Invalid %s: step %d: \"interface\" must be one of %v", what, i, ifaces)
		}
		if name, _ := st["step"].(string); name == "" {
			return badRequest("Invalid %s: step %d: \"step\" is required", what, i)
		}
		if a, ok := st["args"]; ok {
			if _, isObj := a.(map[string]any); !isObj {
				return badRequest("Invalid %s: step %d: \"args\" must be an object", what, i)
			}
		}
		if p, ok := st["priority"]; ok || needPriority {
			num, isNum := p.(json.Number)
			if _, err := num.Int64(); !isNum || err != nil {
				return badRequest("Invalid %s: step %d: \"priority\" must be an integer", what, i)
			}
		}
		for k := range st {
			if !slices.Contains([]string{"interface", "step", "args", "priority"}, k) {
				return badRequest("Invalid %s: step %d: unexpected key %q", what, i, k)
			}
		}
	}
	return nil
}

// recordProvisionRequest moves the node into the transition's state and keeps
// what the conductor needs to act on it.
func recordProvisionRequest(n *proto.Node, req proto.ProvisionRequest, t transition) {
	n.ProvisionState = t.to
	n.TargetProvisionState = t.target
	n.ProvisionUpdatedAt = proto.Now()
	n.LastError = nil
	if req.Target == proto.VerbAbort && state.IsFailed(t.to) {
		// The failed state and its reason are one change.
		msg := state.AbortedReason(t.from)
		n.LastError = &msg
	}
	request := flowstate.Request{Verb: string(req.Target), From: t.from, RequestedAt: n.ProvisionUpdatedAt.Format(proto.TimeLayout),
		CleanSteps: stepCalls(req.CleanSteps), DeploySteps: stepCalls(req.DeploySteps), ServiceSteps: stepCalls(req.ServiceSteps),
		DisableRamdisk: req.DisableRamdisk}
	if req.RescuePassword != "" {
		// Ironic keeps it in instance_info, where API output masks it.
		if n.InstanceInfo == nil {
			n.InstanceInfo = proto.Dict{}
		}
		n.InstanceInfo["rescue_password"] = req.RescuePassword
	}
	flowstate.Update(n, func(s *flowstate.State) { s.Request = &request })
	if req.ConfigDrive != nil {
		if n.InstanceInfo == nil {
			n.InstanceInfo = proto.Dict{}
		}
		n.InstanceInfo["configdrive"] = req.ConfigDrive
	}
}

var powerTargets = map[proto.PowerState]int{
	proto.PowerOn: 1, proto.PowerOff: 1, proto.PowerRebooting: 1,
	proto.PowerSoftReboot: 27, proto.PowerSoftOff: 27,
}

func (s *Server) setPowerState(c echo.Context) error {
	obj, err := readJSONObject(c, "power state")
	if err != nil {
		return err
	}
	if err := checkFields(c, "power state", obj, []string{"target", "timeout"}, map[string]int{"timeout": 27}); err != nil {
		return err
	}
	var req proto.PowerRequest
	if err := decodeInto(obj, &req, "power state request"); err != nil {
		return err
	}
	minV, ok := powerTargets[req.Target]
	if !ok {
		return badRequest("Invalid power state target %q; expected one of: power on, power off, rebooting, soft rebooting, soft power off", req.Target)
	}
	if minV > minor(c) {
		return notAcceptable()
	}
	if req.Timeout != nil && (*req.Timeout < 1 || *req.Timeout > maxPowerTimeout) {
		return badRequest("Invalid timeout %d: it must be between 1 and %d seconds", *req.Timeout, maxPowerTimeout)
	}
	ident := c.Param("node")
	n, err := s.updateUnlocked(c.Request().Context(), ident, func(n *proto.Node) error {
		if n.Reservation != nil {
			return nodeLocked(n.UUID, *n.Reservation)
		}
		switch n.ProvisionState {
		case proto.StateCleaning, proto.StateCleanWait:
			return badRequest("Can not change power state of node %s while it is in state \"%s\".", n.UUID, n.ProvisionState)
		}
		t := req.Target
		n.TargetPowerState = &t
		if req.Timeout != nil {
			flowstate.Update(n, func(s *flowstate.State) { s.PowerTimeout = *req.Timeout })
		}
		return nil
	})
	if err != nil {
		return s.storeError(err, "Node", ident)
	}
	s.history(c, n.UUID, "INFO", "Power request \""+string(req.Target)+"\"")
	s.notify(n.UUID)
	c.Response().Header().Set("Location", baseURL(c)+"/v1/nodes/"+n.UUID+"/states")
	return c.NoContent(http.StatusAccepted)
}

func (s *Server) getSupportedBootDevices(c echo.Context) error {
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	hw, _ := driver.Lookup(n.Driver)
	devs := hw.BootDevices
	if devs == nil {
		devs = []string{}
	}
	return c.JSON(http.StatusOK, map[string]any{"supported_boot_devices": devs})
}

func (s *Server) setMaintenance(c echo.Context) error {
	var req proto.MaintenanceRequest
	if c.Request().ContentLength != 0 {
		obj, err := readJSONObject(c, "maintenance")
		if err != nil && !isMissingBody(err) {
			return err
		}
		if obj != nil {
			if err := checkFields(c, "maintenance", obj, []string{"reason"}, nil); err != nil {
				return err
			}
			if err := decodeInto(obj, &req, "maintenance request"); err != nil {
				return err
			}
		}
	}
	if r := c.QueryParam("reason"); r != "" && req.Reason == "" {
		req.Reason = r
	}
	if err := checkLen("maintenance", "reason", &req.Reason, maxReasonLen); err != nil {
		return err
	}
	return s.changeMaintenance(c, true, req.Reason)
}

func (s *Server) unsetMaintenance(c echo.Context) error { return s.changeMaintenance(c, false, "") }

func (s *Server) changeMaintenance(c echo.Context, on bool, reason string) error {
	ident := c.Param("node")
	n, err := s.store.UpdateNode(c.Request().Context(), ident, func(n *proto.Node) error {
		n.Maintenance = on
		n.MaintenanceReason = nil
		if on && reason != "" {
			n.MaintenanceReason = &reason
		}
		if !on {
			n.Fault = nil
		}
		return nil
	})
	if err != nil {
		return s.storeError(err, "Node", ident)
	}
	ev := "Maintenance mode unset"
	if on {
		ev = "Maintenance mode set: " + reason
	}
	s.history(c, n.UUID, "INFO", ev)
	return c.NoContent(http.StatusAccepted)
}

// validated are the interfaces GET .../validate reports, as Ironic lists them.
var validated = []string{"bios", "boot", "console", "deploy", "firmware", "inspect", "management", "network", "power", "raid", "rescue", "storage"}

func (s *Server) validateNode(c echo.Context) error {
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	ifs, resolveErr := driver.Resolve(n)
	out := map[string]proto.ValidateResult{}
	for _, iface := range validated {
		impl := *interfaceField(n, iface)
		out[iface] = validateInterface(n, ifs, resolveErr, iface, impl)
	}
	return c.JSON(http.StatusOK, out)
}

// validateInterface asks the node's implementation of iface whether its
// configuration (driver_info, instance_info) is complete and usable,
// without contacting the BMC (see offlineResult).
func validateInterface(n *proto.Node, ifs driver.Set, resolveErr error, iface, impl string) proto.ValidateResult {
	yes, no := true, false
	result := func(err error) proto.ValidateResult {
		if err != nil {
			reason := secrets.Scrub(err.Error())
			return proto.ValidateResult{Result: &no, Reason: &reason}
		}
		return proto.ValidateResult{Result: &yes}
	}
	if impl == "no-"+iface || impl == "" {
		reason := "not supported"
		return proto.ValidateResult{Result: nil, Reason: &reason}
	}
	if hw, found := driver.Lookup(n.Driver); !found || hw.Check(iface, impl) != nil {
		return result(fmt.Errorf("interface %s is not enabled for hardware type %s", impl, n.Driver))
	}
	switch iface {
	case "power", "management", "boot", "inspect":
		if resolveErr != nil {
			return result(resolveErr)
		}
	}
	return offlineResult(n, ifs, iface)
}

func (s *Server) listHistory(c echo.Context) error {
	if minor(c) < 78 {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	detail, err := parseBool(c, "detail")
	if err != nil {
		return err
	}
	events, err := s.store.ListHistory(c.Request().Context(), n.UUID)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(events))
	for _, ev := range events {
		out = append(out, historyView(c, n.UUID, ev, detail != nil && *detail))
	}
	return c.JSON(http.StatusOK, map[string]any{"history": out})
}

func (s *Server) getHistoryEvent(c echo.Context) error {
	if minor(c) < 78 {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	events, err := s.store.ListHistory(c.Request().Context(), n.UUID)
	if err != nil {
		return err
	}
	for _, ev := range events {
		if ev.UUID == c.Param("event") {
			return c.JSON(http.StatusOK, historyView(c, n.UUID, ev, true))
		}
	}
	return notFound("Node history record %s could not be found.", c.Param("event"))
}

func (s *Server) getInventory(c echo.Context) error {
	if minor(c) < 81 {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	inv, plugin, err := s.store.GetInventory(c.Request().Context(), n.UUID)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("Inventory for node %s could not be found.", n.UUID)
	}
	if err != nil {
		return err
	}
	if len(plugin) == 0 {
		plugin = json.RawMessage("{}")
	}
	return c.JSON(http.StatusOK, map[string]json.RawMessage{"inventory": inv, "plugin_data": plugin})
}

// stepCalls is the typed form of user steps that checkSteps accepted (so
// they convert); nil stays nil, since an empty list is a request too.
func stepCalls(steps []proto.Dict) []proto.StepCall {
	if steps == nil {
		return nil
	}
	out := make([]proto.StepCall, 0, len(steps))
	b, _ := json.Marshal(steps)
	_ = json.Unmarshal(b, &out)
	return out
}
