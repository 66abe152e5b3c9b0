package inspectrules

import (
	"reflect"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// mayChange reports whether rules may change the node attribute with this
// JSON name.
func mayChange(name string) bool {
	return settable[name] || name == "traits" || strings.HasSuffix(name, "_interface")
}

// CopySettable copies from src to dst exactly the attributes rules may
// change, so a caller can apply a rule run made on a copy of the node to
// the node it is about to store without touching anything else.
func CopySettable(dst, src *proto.Node) {
	dv, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	t := dv.Type()
	for i := range t.NumField() {
		if mayChange(jsonName(t.Field(i))) {
			dv.Field(i).Set(sv.Field(i))
		}
	}
}

// DriverChanges lists the driver and interface attributes that differ
// between a and b.
func DriverChanges(a, b *proto.Node) []string {
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	t := av.Type()
	var out []string
	for i := range t.NumField() {
		name := jsonName(t.Field(i))
		if (name == "driver" || strings.HasSuffix(name, "_interface")) && !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			out = append(out, name)
		}
	}
	return out
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}
