package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/jsonscan"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Rendering ports from their stored documents (store.PortDocs): the
// document, encoding/json's bytes of the port, is split into its top-level
// members and each shown field's bytes are copied through; only a
// free-form object that masking could change (extra, internal_info,
// local_link_connection, when some string in it could be a secret key) is
// decoded, masked and encoded.
// The output is the bytes (*objectWriter).port writes for the decoded
// port; the golden and view tests hold both paths to that. A field added
// to proto.Port needs nothing here: the layout comes from the struct.

// docLayout is what copying a wire struct's stored document needs.
type docLayout struct {
	fields      []wireField
	pos         map[string]int // JSON name → position in fields
	structOrder []int          // positions in struct order, as documents list them
	zero        [][]byte       // each field's zero value as JSON
}

func newDocLayout(t reflect.Type, fields []wireField) *docLayout {
	l := &docLayout{fields: fields, pos: make(map[string]int, len(fields)),
		structOrder: make([]int, len(fields)), zero: make([][]byte, len(fields))}
	for i, f := range fields {
		l.pos[f.name] = i
		l.structOrder[i] = i
		b, err := json.Marshal(reflect.New(t.Field(f.index).Type).Interface())
		if err != nil {
			panic(err)
		}
		l.zero[i] = b
	}
	slices.SortFunc(l.structOrder, func(a, b int) int { return fields[a].index - fields[b].index })
	return l
}

// split fills slots (by field position) with doc's members; false when doc
// is not a JSON object.
func (l *docLayout) split(doc []byte, slots viewSlots) bool {
	next := 0 // members come in struct order: expect structOrder[next]
	member := func(key, val []byte) {
		if next < len(l.structOrder) {
			if i := l.structOrder[next]; l.fields[i].name == string(key) {
				slots[i] = val
				next++
				return
			}
		}
		if i, ok := l.pos[string(key)]; ok {
			slots[i] = val
		}
	}
	if jsonscan.Lines(doc, member) == nil {
		return true
	}
	clear(slots)
	next = 0
	return jsonscan.Members(doc, member) == nil
}

var portLayout = newDocLayout(reflect.TypeFor[proto.Port](), portWireFields)

// emptyJSON reports whether val is the JSON of a value omitempty omits.
func emptyJSON(val []byte) bool {
	switch string(val) {
	case "null", `""`, "[]", "{}", "false", "0":
		return true
	}
	return false
}

// portDoc writes the stored port doc as (*objectWriter).port writes the
// port it decodes to. base is the request's base URL.
func (w *objectWriter) portDoc(c echo.Context, base string, doc []byte, plan fieldPlan) error {
	l := portLayout
	if cap(w.slots) < len(l.fields) {
		w.slots = make(viewSlots, len(l.fields))
	}
	slots := w.slots[:len(l.fields)]
	clear(slots)
	uuid := ""
	if l.split(doc, slots) {
		uuid, _ = plainJSONString(slots[l.pos["uuid"]])
	}
	if slots[l.pos["available_for_dynamic_portgroup"]] == nil {
		// Stored before 1.111: decoding reads the field's absence as true.
		uuid = ""
	}
	if uuid == "" {
		// Not encoding/json's bytes of a port, or one that needs a default
		// the bytes lack: take the decoding path.
		p := new(proto.Port)
		if err := json.Unmarshal(doc, p); err != nil {
			return err
		}
		return w.port(c, p, plan)
	}
	self := "ports/" + uuid
	plain := w.plainBase(base) // and the UUID is plain: plainJSONString checked it
	w.buf.Grow(len(doc) + 256)
	w.buf.WriteByte('{')
	first := true
	for _, f := range plan.fields {
		val := slots[f.pos]
		switch {
		case f.link:
		case val == nil:
			if f.omitEmpty {
				continue
			}
			val = l.zero[f.pos]
		case f.omitEmpty && emptyJSON(val):
			continue
		}
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		w.buf.Write(f.key)
		switch {
		case f.link:
			if err := w.linksPlain(base, self, f.linkPath, plain && isPlainString(f.linkPath)); err != nil {
				return err
			}
		case f.secret && plan.masked && mayHoldSecret(val):
			var d proto.Dict
			if err := json.Unmarshal(val, &d); err != nil {
				return err
			}
			if err := w.value(secrets.MaskDict(d)); err != nil {
				return err
			}
		default:
			w.buf.Write(val)
		}
	}
	w.buf.WriteByte('}')
	return nil
}

// mayHoldSecret reports whether masking could change the JSON value val:
// some string in it (key or value, to keep the test simple) is a secret
// key, or has an escape that would have to be decoded to tell. A port's
// local_link_connection ({"switch_id": …, "port_id": …}) holds none and
// is copied as is: encoding/json wrote it, so decoding and encoding it
// again would give the same bytes.
func mayHoldSecret(val []byte) bool {
	for i := 0; i < len(val); i++ {
		if val[i] != '"' {
			continue
		}
		end := i + 1
		for end < len(val) && val[end] != '"' {
			if val[end] == '\\' {
				return true
			}
			end++
		}
		if end == len(val) || secrets.IsSecretKey(string(val[i+1:end])) {
			return true
		}
		i = end
	}
	return false
}

// plainJSONString is the string a JSON string literal holds when it needs
// no unescaping; false otherwise.
func plainJSONString(val []byte) (string, bool) {
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return "", false
	}
	s := string(val[1 : len(val)-1])
	if !isPlainString(s) {
		return "", false
	}
	return s, true
}

// sendPortDocs answers a port list from the stored documents.
func (s *Server) sendPortDocs(c echo.Context, docs store.PortDocs, q store.PortQuery, p listParams, path string, fields []string) error {
	list, err := docs.ListPortDocs(c.Request().Context(), q)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) && p.marker != "" {
			return badRequest("Marker %s could not be found.", p.marker)
		}
		return err
	}
	next := ""
	if len(list) > 0 {
		var last struct {
			UUID string `json:"uuid"`
		}
		if err := json.Unmarshal(list[len(list)-1], &last); err != nil {
			return err
		}
		next = nextLink(c, path, p, len(list), last.UUID)
	}
	plan := planFields(portWireFields, minor(c), fields)
	base := baseURL(c)
	return sendList(c, "ports", len(list), next, func(w *objectWriter, i int) error {
		return w.portDoc(c, base, list[i], plan)
	})
}
