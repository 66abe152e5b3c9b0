package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/allocation"
	"github.com/kilnhq/kiln/controller/api/jsonpatch"
	"github.com/kilnhq/kiln/proto"
)

// patchRoot returns the top-level field a JSON pointer addresses.
func patchRoot(path string) string {
	p := strings.TrimPrefix(path, "/")
	root, _, _ := strings.Cut(p, "/")
	return strings.ReplaceAll(strings.ReplaceAll(root, "~1", "/"), "~0", "~")
}

// checkPatchPaths refuses ops on read-only or too-new fields before anything
// is loaded, so a refused patch cannot change a thing.
func checkPatchPaths(c echo.Context, ops []jsonpatch.Op, patchable []string, minVersion map[string]int) error {
	for _, op := range ops {
		paths := []string{op.Path}
		if op.From != "" {
			paths = append(paths, op.From)
		}
		for _, p := range paths {
			root := patchRoot(p)
			if !slices.Contains(patchable, root) {
				return badRequest("Cannot patch %s. Only the following can be updated: %s", p, strings.Join(patchable, ", "))
			}
			if v, ok := minVersion[root]; ok && v > minor(c) {
				return notAcceptable()
			}
		}
	}
	return nil
}

// applyPatch applies ops to the JSON form of v and decodes the result into out.
// A root field that is removed goes back to its value in blank (Ironic resets
// removed fields to their defaults).
func applyPatch(v any, blank any, ops []jsonpatch.Op, out any, what string) error {
	doc, err := toDoc(v)
	if err != nil {
		return err
	}
	for _, k := range []string{"links", "ports", "states", "portgroups", "volume"} {
		delete(doc, k)
	}
	if err := refuseSecretReads(doc, ops); err != nil {
		return err
	}
	patched, err := jsonpatch.Apply(doc, ops)
	if err != nil {
		return badRequest("Invalid patch for %s: %v", what, err)
	}
	patched = keepStoredSecrets(doc, patched)
	defaults, err := toDoc(blank)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op.Op == "remove" && !strings.Contains(strings.TrimPrefix(op.Path, "/"), "/") {
			root := patchRoot(op.Path)
			patched[root] = defaults[root]
		}
	}
	b, err := json.Marshal(patched)
	if err != nil {
		return badRequest("Invalid patch for %s: %v", what, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return badRequest("Invalid patch for %s: %v", what, err)
	}
	return decodeInto(raw, out, what)
}

func (s *Server) patchNode(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	ops, err := jsonpatch.ParseOps(body)
	if err != nil {
		return badRequest("Invalid patch: %v", err)
	}
	if err := checkPatchPaths(c, ops, nodePatchable, proto.NodeFieldMinVersion); err != nil {
		return err
	}
	if err := checkMandatoryRemovals(ops, nodeMandatory); err != nil {
		return err
	}
	reset, err := resetInterfacesParam(c, ops)
	if err != nil {
		return err
	}
	ident := c.Param("node")
	var ended string // the allocation a removed instance_uuid ends
	n, err := s.updateUnlocked(c.Request().Context(), ident, func(n *proto.Node) error {
		if n.Reservation != nil {
			return nodeLocked(n.UUID, *n.Reservation)
		}
		if err := patchAllowed(n, minor(c), onlyRemovesInstanceUUID(ops)); err != nil {
			return err
		}
		blank := proto.Node{Driver: n.Driver}
		if err := completeNode(&blank); err != nil {
			return err
		}
		var updated proto.Node
		if err := applyPatch(n, blank, ops, &updated, "node"); err != nil {
			return err
		}
		if updated.Driver != n.Driver && reset {
			// ?reset_interfaces=true: the new hardware type's defaults for
			// the interfaces the client did not name. Without it they are
			// kept, and completeNode refuses those the new type lacks.
			resetInterfaces(&updated, ops)
		}
		if err := completeNode(&updated); err != nil {
			return err
		}
		if err := s.resolveParentNode(c.Request().Context(), &updated); err != nil {
			return err
		}
		if err := s.nodeChassis(c.Request().Context(), &updated); err != nil {
			return err
		}
		if updated.Driver != n.Driver && n.ConsoleEnabled {
			return conflict("Node %s can not update the driver while the console is enabled. Please stop the console first.", ident)
		}
		syncInstanceName(n, &updated)
		if err := checkProtected(n, &updated); err != nil {
			return err
		}
		if updated.Maintenance != n.Maintenance && !updated.Maintenance {
			updated.MaintenanceReason = nil
		}
		keepReadOnly(n, &updated)
		if ended, err = allocation.EndByInstanceRemoval(n, &updated); err != nil {
			return conflict("%s", err)
		}
		*n = updated
		return nil
	})
	if err != nil {
		return s.storeError(err, "Node", ident)
	}
	s.forgetAllocation(c.Request().Context(), ended, n.UUID)
	return sendNode(c, http.StatusOK, n, nil)
}

// resetInterfaces clears every interface the patch did not name, so that
// completeNode sets the new hardware type's default.
func resetInterfaces(n *proto.Node, ops []jsonpatch.Op) {
	for _, iface := range []string{"bios", "boot", "console", "deploy", "firmware", "inspect", "management", "network", "power", "raid", "rescue", "storage", "vendor"} {
		named := false
		for _, op := range ops {
			if patchRoot(op.Path) == iface+"_interface" {
				named = true
			}
		}
		if !named {
			*interfaceField(n, iface) = ""
		}
	}
}

// keepReadOnly copies every field a patch may not change from the stored node,
// whatever the patched document said.
func keepReadOnly(from, to *proto.Node) {
	to.UUID = from.UUID
	to.DriverInternalInfo = from.DriverInternalInfo
	to.ProvisionState = from.ProvisionState
	to.TargetProvisionState = from.TargetProvisionState
	to.ProvisionUpdatedAt = from.ProvisionUpdatedAt
	to.PowerState = from.PowerState
	to.TargetPowerState = from.TargetPowerState
	to.Fault = from.Fault
	to.Health = from.Health
	to.LastError = from.LastError
	to.Reservation = from.Reservation
	to.ConsoleEnabled = from.ConsoleEnabled
	to.InspectionStartedAt = from.InspectionStartedAt
	to.InspectionFinishedAt = from.InspectionFinishedAt
	to.CleanStep = from.CleanStep
	to.DeployStep = from.DeployStep
	to.ServiceStep = from.ServiceStep
	to.RAIDConfig = from.RAIDConfig
	to.TargetRAIDConfig = from.TargetRAIDConfig
	to.Traits = from.Traits
	to.Conductor = from.Conductor
	to.AllocationUUID = from.AllocationUUID
	to.BootMode = from.BootMode
	to.SecureBoot = from.SecureBoot
	to.CreatedAt = from.CreatedAt
	to.UpdatedAt = from.UpdatedAt
}

// onlyRemovesInstanceUUID reports whether the patch only frees the node from
// its instance, which Ironic allows in maintenance whatever the state.
func onlyRemovesInstanceUUID(ops []jsonpatch.Op) bool {
	return len(ops) == 1 && ops[0].Op == "remove" && ops[0].Path == "/instance_uuid"
}
