package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// Typed rendering: a node or port is written as JSON straight from its
// struct, field by field, in the order a map's keys are written (sorted),
// with the fields newer than the request's microversion and those not
// asked for with ?fields= left out. Which fields appear is decided once per
// request (a fieldPlan), not once per object, and no map[string]any is
// built: the bytes are those the former marshal → map → marshal path gave
// (the golden tests hold them), at a fraction of the work.

// wireField is one JSON field of a wire struct.
type wireField struct {
	name       string
	key        []byte // "name":
	index      int    // struct field index
	pos        int    // position in the sorted list wireFields returns
	minVersion int    // microversion that introduced it (0: always there)
	omitEmpty  bool
	secret     bool // a free-form object that masking rewrites, or last_error
	// plain: a string or bool, or a pointer to one, with no JSON or text
	// marshaller of its own, which object writes without the encoder.
	plain bool
	// link: a []proto.Link (links, or a sub-resource's such as a node's
	// ports), which object writes from the object's path when the writer
	// has one (objectWriter.self), at linkPath below it.
	link     bool
	linkPath string
}

// linkPath is the path of a link field below its object's: "" for links,
// "/<name>" for a sub-resource's (a node's ports: /v1/nodes/<uuid>/ports).
func linkPath(name string) string {
	if name == "links" {
		return ""
	}
	return "/" + name
}

var (
	linkList      = reflect.TypeFor[[]proto.Link]()
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// isPlain reports whether t is written by writePlain.
func isPlain(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return false
	}
	return t.Kind() == reflect.String || t.Kind() == reflect.Bool
}

// wireFields lists t's JSON fields sorted by name, as encoding/json writes a
// map's keys. Every exported field must have a json tag: a field added
// without one would otherwise change names silently.
func wireFields(t reflect.Type, minVersion map[string]int, secret []string) []wireField {
	var out []wireField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, ok := f.Tag.Lookup("json")
		if !ok {
			panic(fmt.Sprintf("%s.%s has no json tag", t.Name(), f.Name))
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		key, _ := json.Marshal(name)
		out = append(out, wireField{name: name, key: append(key, ':'), index: i, minVersion: minVersion[name],
			omitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty"), secret: slices.Contains(secret, name),
			plain: isPlain(f.Type), link: f.Type == linkList, linkPath: linkPath(name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	for i := range out {
		out[i].pos = i
	}
	return out
}

var (
	nodeWireFields = wireFields(reflect.TypeFor[proto.Node](), proto.NodeFieldMinVersion, append(slices.Clone(secrets.NodeFields), "last_error"))
	portWireFields = wireFields(reflect.TypeFor[proto.Port](), proto.PortFieldMinVersion, secrets.PortFields)
)

// fieldPlan is the fields one request shows, in output order.
type fieldPlan struct {
	fields []*wireField
	// masked: a shown field can hold a secret, so objects are masked
	// before they are written.
	masked bool
	// shown names the fields in the plan, for the links a node needs.
	shown map[string]bool
}

// planFields decides which of all are shown at microversion minor: those
// not newer than it and, when fields is non-nil, those asked for (links
// always, as Ironic does).
func planFields(all []wireField, minor int, fields []string) fieldPlan {
	if fields == nil {
		return cachedPlan(all, minor)
	}
	return buildPlan(all, minor, fields)
}

// buildPlan is planFields, built anew.
func buildPlan(all []wireField, minor int, fields []string) fieldPlan {
	var p fieldPlan
	for i := range all {
		f := &all[i]
		if f.minVersion > minor {
			continue
		}
		if fields != nil && f.name != "links" && !slices.Contains(fields, f.name) {
			continue
		}
		p.fields = append(p.fields, f)
		p.masked = p.masked || f.secret
		if p.shown == nil {
			p.shown = map[string]bool{}
		}
		p.shown[f.name] = true
	}
	return p
}

// objectWriter writes wire structs into one buffer; its encoder is reused
// for every field value.
type objectWriter struct {
	buf   bytes.Buffer
	enc   *json.Encoder
	slots viewSlots // nodeView's members, reused
	// base is the request's base URL (baseOf), self the path of the object
	// being written ("nodes/<uuid>"): when set, link fields are written
	// from them rather than from the struct.
	base, self string
	// checkedBase and basePlain remember plainBase's last answer.
	checkedBase string
	basePlain   bool
}

var writerPool = sync.Pool{New: func() any {
	w := new(objectWriter)
	w.enc = json.NewEncoder(&w.buf)
	return w
}}

func getWriter() *objectWriter {
	w := writerPool.Get().(*objectWriter)
	w.buf.Reset()
	w.base, w.self = "", ""
	return w
}

// baseOf is the request's base URL, computed once per writer.
func (w *objectWriter) baseOf(c echo.Context) string {
	if w.base == "" {
		w.base = baseURL(c)
	}
	return w.base
}

func putWriter(w *objectWriter) {
	if w.buf.Cap() <= 1<<20 { // keep the pool from holding huge buffers
		writerPool.Put(w)
	}
}

// value writes v as JSON without the encoder's trailing newline.
func (w *objectWriter) value(v any) error {
	if err := w.enc.Encode(v); err != nil {
		return err
	}
	w.buf.Truncate(w.buf.Len() - 1)
	return nil
}

// object writes the plan's fields of the struct *ptr.
func (w *objectWriter) object(ptr any, p fieldPlan) error { return w.objectRaw(ptr, p, nil) }

// objectRaw is object with some fields' JSON given as is (raw, by name).
func (w *objectWriter) objectRaw(ptr any, p fieldPlan, raw map[string]string) error {
	v := reflect.ValueOf(ptr).Elem()
	w.buf.WriteByte('{')
	first := true
	for _, f := range p.fields {
		fv := v.Field(f.index)
		if f.link && w.self != "" {
			if !first {
				w.buf.WriteByte(',')
			}
			first = false
			w.buf.Write(f.key)
			if err := w.links(w.base, w.self, f.linkPath); err != nil {
				return err
			}
			continue
		}
		if f.omitEmpty && isEmpty(fv) {
			continue
		}
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		w.buf.Write(f.key)
		if r, ok := raw[f.name]; ok {
			w.buf.WriteString(r)
			continue
		}
		if f.plain && w.writePlain(fv) {
			continue
		}
		if err := w.value(fv.Addr().Interface()); err != nil {
			return fmt.Errorf("render %s: %w", f.name, err)
		}
	}
	w.buf.WriteByte('}')
	return nil
}

// writePlain writes a plain field's value as encoding/json would, when
// that is simple: null, true, false, or a string of printable ASCII that
// needs no escaping. It reports false, having written nothing, otherwise.
func (w *objectWriter) writePlain(v reflect.Value) bool {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			w.buf.WriteString("null")
			return true
		}
		v = v.Elem()
	}
	if v.Kind() == reflect.Bool {
		if v.Bool() {
			w.buf.WriteString("true")
		} else {
			w.buf.WriteString("false")
		}
		return true
	}
	return w.plainString(v.String())
}

// plainString writes str as encoding/json would when it is printable ASCII
// that needs no escaping; it reports false, having written nothing,
// otherwise.
func (w *objectWriter) plainString(str string) bool {
	// encoding/json escapes ", \, control characters and, for HTML
	// safety, <, > and &; anything beyond ASCII takes the encoder too.
	if !isPlainString(str) {
		return false
	}
	w.buf.WriteByte('"')
	w.buf.WriteString(str)
	w.buf.WriteByte('"')
	return true
}

// isEmpty is encoding/json's omitempty test for the kinds wire structs use.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map, reflect.String, reflect.Array:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Bool:
		return !v.Bool()
	}
	return v.IsZero()
}

// nodePlan is the request's plan for nodes.
func nodePlan(c echo.Context, fields []string) fieldPlan {
	return planFields(nodeWireFields, minor(c), fields)
}

// node writes n as the plan shows it: masked when a shown field can
// hold a secret, with its links.
func (w *objectWriter) node(c echo.Context, n *proto.Node, p fieldPlan) error {
	m := n
	if p.masked {
		masked := maskedNode(n)
		m = &masked
	}
	// Older microversions name some states as Ironic did then.
	var raw map[string]string
	switch {
	case m.ProvisionState == proto.StateAvailable && minor(c) < 2:
		raw = map[string]string{"provision_state": "null"}
	case m.ProvisionState == proto.StateInspectWait && minor(c) < 39:
		renamed := *m
		renamed.ProvisionState = proto.StateInspecting
		m = &renamed
	}
	w.baseOf(c)
	w.self = "nodes/" + n.UUID
	defer func() { w.self = "" }()
	return w.objectRaw(m, p, raw)
}

// port writes p as the plan shows it.
func (w *objectWriter) port(c echo.Context, p *proto.Port, plan fieldPlan) error {
	m := p
	if plan.masked {
		masked := secrets.Port(p)
		m = &masked
	}
	w.baseOf(c)
	w.self = "ports/" + p.UUID
	defer func() { w.self = "" }()
	return w.object(m, plan)
}

// sendNode answers with one node.
func sendNode(c echo.Context, status int, n *proto.Node, fields []string) error {
	w := getWriter()
	defer putWriter(w)
	if err := w.node(c, n, nodePlan(c, fields)); err != nil {
		return err
	}
	w.buf.WriteByte('\n')
	return c.Blob(status, echo.MIMEApplicationJSON, w.buf.Bytes())
}

// sendPort answers with one port.
func sendPort(c echo.Context, status int, p *proto.Port, fields []string) error {
	w := getWriter()
	defer putWriter(w)
	if err := w.port(c, p, planFields(portWireFields, minor(c), fields)); err != nil {
		return err
	}
	w.buf.WriteByte('\n')
	return c.Blob(status, echo.MIMEApplicationJSON, w.buf.Bytes())
}

// sendList answers {"next": …, "<key>": [items]} (next only when set; keys
// in map order, so next comes after a key that sorts before it, such as
// "chassis") with each item written by item(i).
func sendList(c echo.Context, key string, count int, next string, item func(w *objectWriter, i int) error) error {
	w := getWriter()
	defer putWriter(w)
	w.buf.WriteByte('{')
	writeNext := func() error { return w.value(next) }
	if next != "" && key > "next" {
		w.buf.WriteString(`"next":`)
		if err := writeNext(); err != nil {
			return err
		}
		w.buf.WriteByte(',')
	}
	w.buf.WriteString(`"` + key + `":[`)
	for i := range count {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		if err := item(w, i); err != nil {
			return err
		}
	}
	w.buf.WriteByte(']')
	if next != "" && key < "next" {
		w.buf.WriteString(`,"next":`)
		if err := writeNext(); err != nil {
			return err
		}
	}
	w.buf.WriteString("}\n")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, w.buf.Bytes())
}
