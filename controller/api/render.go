package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// maskedNode is n as clients may see it: every secret masked at any depth
// (credentials, the agent token, the config drive), last_error scrubbed.
func maskedNode(n *proto.Node) proto.Node { return secrets.Node(n) }

// toDoc turns a wire struct into its JSON object form.
func toDoc(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// nodeLinks fills in the node's own and sub-resource links.
func nodeLinks(c echo.Context, n *proto.Node) {
	n.Links = links(c, "nodes/"+n.UUID)
	n.Ports = links(c, "nodes/"+n.UUID+"/ports")
	n.States = links(c, "nodes/"+n.UUID+"/states")
	n.Portgroups = links(c, "nodes/"+n.UUID+"/portgroups")
	n.Volume = links(c, "nodes/"+n.UUID+"/volume")
}

// renderNode shows n at the request's microversion, limited to fields when
// fields is non-nil (links always included, as Ironic does).
func renderNode(c echo.Context, n *proto.Node, fields []string) (map[string]any, error) {
	if fields != nil && isDefaultNodeFields(fields) {
		// None of the default list fields can hold a secret: no masking.
		m := *n
		nodeLinks(c, &m)
		doc := fastNodeDoc(&m)
		if minor(c) < proto.NodeFieldMinVersion["name"] {
			delete(doc, "name")
		}
		oldProvisionState(c, doc)
		return doc, nil
	}
	m := maskedNode(n)
	nodeLinks(c, &m)
	doc, err := toDoc(m)
	if err != nil {
		return nil, fmt.Errorf("render node %s: %w", n.UUID, err)
	}
	filterDoc(doc, proto.NodeFieldMinVersion, minor(c), fields)
	oldProvisionState(c, doc)
	return doc, nil
}

// renderPort shows p at the request's microversion.
func renderPort(c echo.Context, p *proto.Port, fields []string) (map[string]any, error) {
	m := secrets.Port(p)
	m.Links = links(c, "ports/"+p.UUID)
	doc, err := toDoc(m)
	if err != nil {
		return nil, fmt.Errorf("render port %s: %w", p.UUID, err)
	}
	filterDoc(doc, proto.PortFieldMinVersion, minor(c), fields)
	return doc, nil
}

// filterDoc drops fields newer than the microversion and, when fields is
// non-nil, every field not asked for (links are always kept).
func filterDoc(doc map[string]any, minVersion map[string]int, minor int, fields []string) {
	for k := range doc {
		if v, ok := minVersion[k]; ok && v > minor {
			delete(doc, k)
		}
	}
	if fields != nil {
		for k := range doc {
			if k != "links" && !slices.Contains(fields, k) {
				delete(doc, k)
			}
		}
	}
}

func isDefaultNodeFields(fields []string) bool {
	if len(fields) != len(proto.NodeDefaultListFields) {
		return false
	}
	for _, f := range proto.NodeDefaultListFields {
		if !slices.Contains(fields, f) {
			return false
		}
	}
	return true
}

// fastNodeDoc builds the default list view without a JSON round trip; node
// lists are the hottest read path.
func fastNodeDoc(n *proto.Node) map[string]any {
	doc := map[string]any{
		"uuid":            n.UUID,
		"name":            n.Name,
		"instance_uuid":   n.InstanceUUID,
		"power_state":     n.PowerState,
		"provision_state": n.ProvisionState,
		"maintenance":     n.Maintenance,
		"links":           n.Links,
	}
	return doc
}

// parseFields reads ?fields=a,b and checks each against the known fields and
// the microversion (406 for a field newer than the request, 400 for unknown).
func parseFields(c echo.Context, known map[string]bool, minVersion map[string]int) ([]string, error) {
	raw := c.QueryParam("fields")
	if raw == "" {
		return nil, nil
	}
	if minor(c) < 8 {
		return nil, notAcceptable()
	}
	var fields []string
	for f := range strings.SplitSeq(raw, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !known[f] {
			return nil, badRequest("Field(s) \"%s\" are not valid", f)
		}
		if v, ok := minVersion[f]; ok && v > minor(c) {
			return nil, notAcceptable()
		}
		fields = append(fields, f)
	}
	return fields, nil
}

// jsonFields returns the JSON names of a struct's fields, for field validation.
func jsonFields(v any) map[string]bool {
	doc, err := toDoc(v)
	if err != nil {
		panic(err)
	}
	out := map[string]bool{}
	for k := range doc {
		out[k] = true
	}
	return out
}

var (
	nodeFieldNames = jsonFields(sampleNode())
	portFieldNames = jsonFields(proto.Port{Links: []proto.Link{{}}})
)

func sampleNode() proto.Node {
	l := []proto.Link{{}}
	return proto.Node{Links: l, Ports: l, States: l, Portgroups: l, Volume: l}
}
