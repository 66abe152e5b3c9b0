package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// referenceRender is how answers were rendered before typed rendering:
// mask, marshal, decode into a map, drop fields, marshal the map. The typed
// writer must give the same bytes for every node, microversion and field
// selection.
func referenceRender(t *testing.T, v any, minVersion map[string]int, minor int, fields []string) []byte {
	t.Helper()
	doc, err := toDoc(v)
	if err != nil {
		t.Fatal(err)
	}
	filterDoc(doc, minVersion, minor, fields)
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(doc); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func oddDict(r *rand.Rand) proto.Dict {
	values := []any{"<script>&</script>", "line\u2028sep", "ünïcödé ☃", 1e21, -0.5, float64(123456789012), true, nil,
		[]any{1.0, "two", map[string]any{"x": "y"}}, map[string]any{"password": "p", "deep": map[string]any{"token": "t"}}, ""}
	d := proto.Dict{}
	for i := range r.IntN(5) {
		d[[]string{"a", "ipmi_password", "Z", "k" + string(rune('a'+i)), "secret_thing", "é"}[r.IntN(6)]] = values[r.IntN(len(values))]
	}
	return d
}

func TestTypedRenderMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	e := echo.New()
	names := make([]string, 0, len(nodeWireFields))
	for _, f := range nodeWireFields {
		names = append(names, f.name)
	}
	for trial := range 300 {
		name := "n<&>"
		on := proto.PowerOn
		lastErr := "failed: https://user:pw@bmc/ password=x"
		n := &proto.Node{UUID: "u-1", Name: &name, Driver: "fake-hardware", ProvisionState: proto.StateActive,
			PowerState: &on, DriverInfo: oddDict(r), DriverInternalInfo: oddDict(r), InstanceInfo: oddDict(r),
			Properties: oddDict(r), Extra: oddDict(r), Traits: []string{"CUSTOM_A"}, Maintenance: r.IntN(2) == 0,
			CreatedAt: proto.Now()}
		if r.IntN(2) == 0 {
			n.LastError = &lastErr
		}
		desc := []string{"plain words", "ünïcödé", "quote\" back\\slash", "\x01ctl\ttab", "", "a\u2028b", "~!@#$%^*()"}[r.IntN(7)]
		n.Description = &desc
		n.Owner = &desc
		if r.IntN(3) == 0 {
			n.DriverInfo = nil
		}
		minor := 1 + r.IntN(MaxMinor)
		var fields []string
		switch r.IntN(3) {
		case 1:
			fields = proto.NodeDefaultListFields
		case 2:
			fields = []string{}
			for range 1 + r.IntN(6) {
				fields = append(fields, names[r.IntN(len(names))])
			}
		}
		req := httptest.NewRequest("GET", "/v1/nodes", nil)
		req.Header.Set(proto.HeaderIronicAPIVersion, versionString(minor))
		c := e.NewContext(req, httptest.NewRecorder())
		c.Set(ctxMinor, minor)

		m := secrets.Node(n)
		nodeLinks(c, &m)
		want := referenceRender(t, m, proto.NodeFieldMinVersion, minor, fields)
		w := getWriter()
		if err := w.node(c, n, nodePlan(c, fields)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.buf.Bytes(), want) {
			t.Fatalf("trial %d at 1.%d fields %v:\n typed %s\n  want %s", trial, minor, fields, w.buf.Bytes(), want)
		}
		putWriter(w)

		p := &proto.Port{UUID: "p-1", Address: "52:54:00:00:00:01", NodeUUID: "u-1", Extra: oddDict(r),
			InternalInfo: oddDict(r), LocalLinkConnection: oddDict(r), PXEEnabled: true}
		pm := secrets.Port(p)
		pm.Links = links(c, "ports/"+p.UUID)
		var pf []string
		if r.IntN(2) == 0 {
			pf = []string{"uuid", "extra", "local_link_connection"}
		}
		want = referenceRender(t, pm, proto.PortFieldMinVersion, minor, pf)
		w = getWriter()
		if err := w.port(c, p, planFields(portWireFields, minor, pf)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.buf.Bytes(), want) {
			t.Fatalf("port trial %d at 1.%d fields %v:\n typed %s\n  want %s", trial, minor, pf, w.buf.Bytes(), want)
		}
		putWriter(w)
	}
}

// nodeLinks fills in every link list of a node, as the former path did.
func nodeLinks(c echo.Context, n *proto.Node) {
	n.Links = links(c, "nodes/"+n.UUID)
	n.Ports = links(c, "nodes/"+n.UUID+"/ports")
	n.States = links(c, "nodes/"+n.UUID+"/states")
	n.Portgroups = links(c, "nodes/"+n.UUID+"/portgroups")
	n.Volume = links(c, "nodes/"+n.UUID+"/volume")
}
