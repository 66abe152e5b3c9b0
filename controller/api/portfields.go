package api

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/api/jsonpatch"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Ironic's schema limits of the port fields of microversions 1.97–1.101.
const (
	maxPortDescriptionLen = 255
	maxPortVendorLen      = 32
	maxPortCategoryLen    = 80
)

// portCreateMinVersion is the port fields' microversions plus node_ident,
// which a create may send from 1.94 instead of node_uuid.
var portCreateMinVersion = func() map[string]int {
	m := maps.Clone(proto.PortFieldMinVersion)
	m["node_ident"] = 94
	return m
}()

// popNodeIdent takes node_ident (a node's name or UUID, 1.94) out of a
// port create body: it is not a port field, only another way to name the
// node.
func popNodeIdent(obj map[string]json.RawMessage) (string, error) {
	raw, ok := obj["node_ident"]
	if !ok {
		return "", nil
	}
	delete(obj, "node_ident")
	var ident string
	if err := json.Unmarshal(raw, &ident); err != nil {
		return "", badRequest("Schema error for port: 'node_ident' must be a string")
	}
	if ident == "" {
		return "", badRequest("Schema error for port: 'node_ident' must not be empty")
	}
	if err := checkLen("port", "node_ident", &ident, maxNameLen); err != nil {
		return "", err
	}
	return ident, nil
}

// portNodeIdent resolves a port's node_ident, a name or a UUID, to the
// node's UUID; a node that does not exist is 400, as Ironic answers a
// create naming one.
func (s *Server) portNodeIdent(ctx context.Context, ident string) (string, error) {
	n, err := s.store.GetNode(ctx, ident)
	if errors.Is(err, store.ErrNotFound) {
		return "", badRequest("Node %s could not be found.", ident)
	}
	if err != nil {
		return "", err
	}
	return n.UUID, nil
}

// validatePortTexts enforces Ironic's lengths on the free-text port fields.
func validatePortTexts(p *proto.Port) error {
	for _, f := range []struct {
		name string
		v    *string
		max  int
	}{{"description", p.Description, maxPortDescriptionLen}, {"vendor", p.Vendor, maxPortVendorLen}, {"category", p.Category, maxPortCategoryLen}} {
		if err := checkLen("port", f.name, f.v, f.max); err != nil {
			return err
		}
	}
	return nil
}

// maxListFilter bounds the values of a comma-separated list filter.
const maxListFilter = 100

// listFilter reads a comma-separated filter value as Ironic's string_list
// does: values trimmed, empty ones and repeats dropped, lower-cased when
// lower is set (conductor groups are stored so). It returns them joined
// again by commas, the form the store's list filters take.
func listFilter(name, v string, lower bool) (string, error) {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if lower {
			item = strings.ToLower(item)
		}
		if item == "" || slices.Contains(out, item) {
			continue
		}
		if len(item) > 255 {
			return "", badRequest("Invalid value for %s: %q is too long", name, item)
		}
		out = append(out, item)
	}
	if len(out) == 0 {
		return "", badRequest("Invalid value for %s: %q", name, v)
	}
	if len(out) > maxListFilter {
		return "", badRequest("Invalid value for %s: at most %d values", name, maxListFilter)
	}
	return strings.Join(out, ","), nil
}

func shardList(v string) (string, error) { return listFilter("shard", v, false) }

func conductorGroupList(v string) (string, error) {
	return listFilter("conductor_groups", v, true)
}

// portPlacementFilters reads the port list filters on a substring of the
// description (1.97), the node's shard (1.82) and conductor group (1.99, ?conductor_groups= as Ironic's server
// reads it, ?conductor_group= as its API reference spells it) into q, with
// Ironic's rules: a node, a port group and shards exclude each other (403
// as Ironic's OperationNotPermitted), and conductor groups go with none of
// node, port group or address (400).
func portPlacementFilters(c echo.Context, q *store.PortQuery) error {
	if v := c.QueryParam("shard"); v != "" {
		if minor(c) < 82 {
			return notAcceptable()
		}
		list, err := shardList(v)
		if err != nil {
			return err
		}
		if q.NodeUUID != "" || q.PortgroupUUID != "" {
			return errorf(http.StatusForbidden, "Operation not permitted.")
		}
		q.Shards = strings.Split(list, ",")
	}
	if v := c.QueryParam("description_contains"); v != "" {
		if minor(c) < 97 {
			return notAcceptable()
		}
		if len(v) > maxPortDescriptionLen {
			return badRequest("Invalid value for description_contains: at most %d characters", maxPortDescriptionLen)
		}
		q.DescriptionContains = v
	}
	for _, param := range []string{"conductor_groups", "conductor_group"} {
		v := c.QueryParam(param)
		if v == "" {
			continue
		}
		if minor(c) < 99 {
			return notAcceptable()
		}
		list, err := conductorGroupList(v)
		if err != nil {
			return err
		}
		if q.NodeUUID != "" || q.PortgroupUUID != "" || q.Address != "" {
			return badRequest("Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters.")
		}
		q.ConductorGroups = append(q.ConductorGroups, strings.Split(list, ",")...)
	}
	return nil
}

// strictPortBools are the port booleans Ironic's schema takes as JSON
// booleans only (1.111), unlike pxe_enabled and is_smartnic.
var strictPortBools = []string{"available_for_dynamic_portgroup"}

// checkStrictPortBools refuses, in a create body, a strict boolean sent
// as anything but true or false.
func checkStrictPortBools(obj map[string]json.RawMessage) error {
	for _, name := range strictPortBools {
		if raw, ok := obj[name]; ok {
			if s := strings.TrimSpace(string(raw)); s != "true" && s != "false" {
				return badRequest("Schema error for port: %s is not of type 'boolean'", s)
			}
		}
	}
	return nil
}

// checkStrictPortBoolOps is checkStrictPortBools for a JSON patch.
func checkStrictPortBoolOps(ops []jsonpatch.Op) error {
	for _, op := range ops {
		if (op.Op == "add" || op.Op == "replace") && slices.Contains(strictPortBools, patchRoot(op.Path)) {
			if _, ok := op.Value.(bool); !ok {
				return badRequest("Schema error for port: %v is not of type 'boolean'", op.Value)
			}
		}
	}
	return nil
}
