package api

import (
	"encoding/json"
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

// isDefaultPortFields reports whether fields asks for exactly the default
// port list view (uuid, address, links), which the port columns answer.
func isDefaultPortFields(fields []string) bool {
	if fields == nil {
		return false
	}
	want := map[string]bool{"uuid": false, "address": false, "links": true} // links are always shown
	for _, f := range fields {
		if _, ok := want[f]; !ok {
			return false
		}
		want[f] = true
	}
	return want["uuid"] && want["address"]
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
