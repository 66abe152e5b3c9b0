package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/jsonscan"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Rendering nodes from their stored views (store.NodeView): the node's
// masked JSON, encoded when the node was written, is split into its
// top-level members and each shown field's bytes are copied through, so a
// node is neither decoded nor masked nor encoded per request. The output
// is the bytes (*objectWriter).node writes for the same node; the golden
// and view tests hold both paths to that.

var (
	// nodeFieldPos maps a node field's JSON name to its nodeWireFields
	// position.
	nodeFieldPos = func() map[string]int {
		m := make(map[string]int, len(nodeWireFields))
		for i, f := range nodeWireFields {
			m[f.name] = i
		}
		return m
	}()
	// nodeStructOrder lists nodeWireFields positions in struct order, the
	// order encoding/json writes a view's members in.
	nodeStructOrder = func() []int {
		out := make([]int, len(nodeWireFields))
		for i := range out {
			out[i] = i
		}
		slices.SortFunc(out, func(a, b int) int { return nodeWireFields[a].index - nodeWireFields[b].index })
		return out
	}()
	// nodeZeroJSON is each field's zero value as JSON: what a view written
	// before the field existed shows for it, as decoding and encoding the
	// stored document would.
	nodeZeroJSON = func() [][]byte {
		t := reflect.TypeFor[proto.Node]()
		out := make([][]byte, len(nodeWireFields))
		for i, f := range nodeWireFields {
			b, err := json.Marshal(reflect.New(t.Field(f.index).Type).Interface())
			if err != nil {
				panic(err)
			}
			out[i] = b
		}
		return out
	}()
	// nodeViewKinds tells, by field position, the fields a view does not
	// hold as they are shown; nodeLinkPaths the link fields' paths below
	// the node's URL.
	nodeViewKinds, nodeLinkPaths = func() ([]viewKind, []string) {
		paths := map[string]string{"links": "", "ports": "/ports", "states": "/states",
			"portgroups": "/portgroups", "volume": "/volume"}
		kinds, out := make([]viewKind, len(nodeWireFields)), make([]string, len(nodeWireFields))
		for i, f := range nodeWireFields {
			if p, ok := paths[f.name]; ok {
				kinds[i], out[i] = viewLink, p
			}
			switch f.name {
			case "reservation":
				kinds[i] = viewReservation
			case "provision_state":
				kinds[i] = viewProvisionState
			}
		}
		return kinds, out
	}()
)

// viewKind is how nodeView writes a field.
type viewKind uint8

const (
	viewCopy           viewKind = iota // the view's bytes
	viewLink                           // built from the base URL and UUID
	viewReservation                    // from the reservation column
	viewProvisionState                 // the view's, renamed for old microversions
)

// viewSlots holds one node's member values by field position.
type viewSlots [][]byte

// nodeView writes the view v as the plan shows it: the bytes node writes
// for the node v was made from. base is the request's base URL.
func (w *objectWriter) nodeView(c echo.Context, base string, v *store.NodeView, p fieldPlan) error {
	if cap(w.slots) < len(nodeWireFields) {
		w.slots = make(viewSlots, len(nodeWireFields))
	}
	slots := w.slots[:len(nodeWireFields)]
	clear(slots)
	next := 0 // members come in struct order: expect nodeStructOrder[next]
	member := func(key, val []byte) {
		if next < len(nodeStructOrder) {
			if i := nodeStructOrder[next]; nodeWireFields[i].name == string(key) {
				slots[i] = val
				next++
				return
			}
		}
		if i, ok := nodeFieldPos[string(key)]; ok {
			slots[i] = val
		}
	}
	err := jsonscan.Lines(v.Doc, member)
	if err != nil {
		clear(slots)
		next = 0
		err = jsonscan.Members(v.Doc, member)
	}
	if err != nil {
		// Not encoding/json's bytes: take the decoding path.
		n := new(proto.Node)
		if err := json.Unmarshal(v.Doc, n); err != nil {
			return err
		}
		n.Reservation = v.Reservation
		return w.node(c, n, p)
	}
	mv := minor(c)
	self := "nodes/" + v.UUID
	plain := w.plainBase(base) && isPlainString(self) // the link paths below it are constants
	w.buf.Grow(len(v.Doc) + 1024)                     // the view and the links, at most
	w.buf.WriteByte('{')
	first := true
	for _, f := range p.fields {
		val := slots[f.pos]
		kind := nodeViewKinds[f.pos]
		switch {
		case kind == viewLink:
		case kind == viewReservation:
			val = nil
			if v.Reservation == nil && f.omitEmpty {
				continue
			}
		case kind == viewProvisionState && v.ProvisionState == proto.StateAvailable && mv < 2:
			val = []byte("null")
		case kind == viewProvisionState && v.ProvisionState == proto.StateInspectWait && mv < 39:
			val = []byte(`"` + proto.StateInspecting + `"`)
		case val == nil:
			if f.omitEmpty {
				continue
			}
			val = nodeZeroJSON[f.pos]
		}
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		w.buf.Write(f.key)
		switch kind {
		case viewLink:
			if err := w.linksPlain(base, self, nodeLinkPaths[f.pos], plain); err != nil {
				return err
			}
		case viewReservation:
			if v.Reservation == nil {
				w.buf.WriteString("null")
			} else if !w.plainString(*v.Reservation) {
				if err := w.value(*v.Reservation); err != nil {
					return err
				}
			}
		default:
			w.buf.Write(val)
		}
	}
	w.buf.WriteByte('}')
	return nil
}

// links writes the self and bookmark links of path+sub as encoding/json
// writes links(c, path+sub), without building the strings when they need
// no escaping (as a host and a UUID never do).
func (w *objectWriter) links(base, path, sub string) error {
	return w.linksPlain(base, path, sub, isPlainString(base) && isPlainString(path) && isPlainString(sub))
}

// linksPlain is links with the caller's answer to whether base, path and
// sub need escaping: a list checks the base once, each object its path
// once, rather than once per link field.
func (w *objectWriter) linksPlain(base, path, sub string, plain bool) error {
	if !plain {
		for i, l := range links0(base, path+sub) {
			w.buf.WriteString([]string{`[{"href":`, `,{"href":`}[i])
			if err := w.value(l.Href); err != nil {
				return err
			}
			w.buf.WriteString(`,"rel":"` + l.Rel + `"}`)
		}
		w.buf.WriteByte(']')
		return nil
	}
	for _, part := range [...]string{`[{"href":"`, base, "/v1/", path, sub, `","rel":"self"},{"href":"`,
		base, "/", path, sub, `","rel":"bookmark"}]`} {
		w.buf.WriteString(part)
	}
	return nil
}

// plainBase is isPlainString(base), remembered for the last base seen:
// every object of a list has the same.
func (w *objectWriter) plainBase(base string) bool {
	if base != w.checkedBase {
		w.checkedBase, w.basePlain = base, isPlainString(base)
	}
	return w.basePlain
}

// links0 is links with a base URL given.
func links0(base, path string) []proto.Link {
	return []proto.Link{{Href: base + "/v1/" + path, Rel: "self"}, {Href: base + "/" + path, Rel: "bookmark"}}
}

// isPlainString reports whether encoding/json writes str as is, quoted.
func isPlainString(str string) bool {
	for i := 0; i < len(str); i++ {
		if c := str[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// listNodeViews answers a node list from the store's views; false when the
// store has none (the caller then lists nodes). The full plan (/detail)
// is answered from kept renderings where the store can tell their
// versions (listKeptViews).
func (s *Server) listNodeViews(c echo.Context, q store.NodeQuery, p listParams, path string, plan fieldPlan) (bool, error) {
	views, ok := store.ViewsOf(s.store)
	if !ok {
		return false, nil
	}
	if vv, ok := store.VersionedViewsOf(s.store); ok && isFullPlan(plan, minor(c)) {
		if done, err := s.listKeptViews(c, vv, q, p, path, plan, keptFull); done {
			return true, err
		}
	}
	vs, err := views.ListNodeViews(c.Request().Context(), q)
	if err != nil {
		return true, listError(err, p)
	}
	next := ""
	if len(vs) > 0 {
		next = nextLink(c, path, p, len(vs), vs[len(vs)-1].UUID)
	}
	base := baseURL(c)
	return true, sendList(c, "nodes", len(vs), next, func(w *objectWriter, i int) error {
		return w.nodeView(c, base, &vs[i], plan)
	})
}

// listError is a node list's store error as the API answers it.
func listError(err error, p listParams) error {
	if errors.Is(err, store.ErrNotFound) && p.marker != "" {
		return badRequest("Marker %s could not be found.", p.marker)
	}
	return err
}

// listKeptViews answers a node list in plan, whose renderings are kept as
// kept, from the page's row versions (read from an index, without the
// documents), the renderings kept for them, and the views of the nodes not
// kept, read by id and kept for the next time. The page is what one read
// at the versions' time answers: false, with nothing sent, when a node of
// the page was deleted or written between the two reads (it may have left
// the filter's or the sort's page); the caller then reads the page whole.
func (s *Server) listKeptViews(c echo.Context, vv store.VersionedNodeViews, q store.NodeQuery, p listParams, path string, plan fieldPlan, kept keptPlan) (bool, error) {
	ctx := c.Request().Context()
	vers, err := vv.ListNodeVersions(ctx, q)
	if err != nil {
		return true, listError(err, p)
	}
	base, mv := baseURL(c), minor(c)
	type item struct {
		uuid string
		out  []byte               // kept, or
		view *store.VersionedView // to render
	}
	items := make([]item, len(vers))
	var miss []int64
	for i, v := range vers {
		if uuid, out, ok := s.views.get(viewKey{id: v.ID, base: base, minor: mv, plan: kept}, v.RowVersion); ok {
			items[i] = item{uuid: uuid, out: out}
		} else {
			miss = append(miss, v.ID)
		}
	}
	if len(miss) > 0 {
		read, err := vv.NodeViewsByID(ctx, miss)
		if err != nil {
			return true, err
		}
		byID := make(map[int64]*store.VersionedView, len(read))
		for i := range read {
			byID[read[i].ID] = &read[i]
		}
		for i, v := range vers {
			if items[i].out != nil {
				continue
			}
			r, ok := byID[v.ID]
			if !ok || r.RowVersion != v.RowVersion {
				return false, nil
			}
			items[i] = item{uuid: r.UUID, view: r}
		}
	}
	next := ""
	if len(items) > 0 {
		next = nextLink(c, path, p, len(items), items[len(items)-1].uuid)
	}
	return true, sendList(c, "nodes", len(items), next, func(w *objectWriter, i int) error {
		it := &items[i]
		if it.view == nil {
			w.buf.Write(it.out)
			return nil
		}
		start := w.buf.Len()
		if err := w.nodeView(c, base, &it.view.NodeView, plan); err != nil {
			return err
		}
		s.views.put(viewKey{id: it.view.ID, base: base, minor: mv, plan: kept}, it.view.RowVersion, it.uuid, w.buf.Bytes()[start:])
		return nil
	})
}

// getNodeView answers GET /v1/nodes/{node} from the store's view; false
// when the store has none.
func (s *Server) getNodeView(c echo.Context, fields []string) (bool, error) {
	views, ok := store.ViewsOf(s.store)
	if !ok {
		return false, nil
	}
	ident := c.Param("node")
	v, err := views.GetNodeView(c.Request().Context(), ident)
	if err != nil {
		return true, s.storeError(err, "Node", ident)
	}
	w := getWriter()
	defer putWriter(w)
	if err := w.nodeView(c, baseURL(c), &v, nodePlan(c, fields)); err != nil {
		return true, err
	}
	w.buf.WriteByte('\n')
	return true, c.Blob(http.StatusOK, echo.MIMEApplicationJSON, w.buf.Bytes())
}
