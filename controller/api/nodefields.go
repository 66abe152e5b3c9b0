package api

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/api/jsonpatch"
	"github.com/kilnhq/kiln/proto"
)

// Node rules of microversions 1.45 (reset_interfaces) and 1.104
// (instance_name) that PATCH applies.

// maxInstanceNameLen is Ironic's schema limit on instance_name.
const maxInstanceNameLen = 255

// resetInterfacesParam reads PATCH's ?reset_interfaces= (1.45): 406 below
// it, and 400 on a patch that does not change the driver, as Ironic.
func resetInterfacesParam(c echo.Context, ops []jsonpatch.Op) (bool, error) {
	v, err := parseBool(c, "reset_interfaces")
	if err != nil || v == nil {
		return false, err
	}
	if minor(c) < 45 {
		return false, notAcceptable()
	}
	if !*v {
		return false, nil
	}
	for _, op := range ops {
		if patchRoot(op.Path) == "driver" && op.Op != "remove" {
			return true, nil
		}
	}
	return false, badRequest("The reset_interfaces parameter can only be used when changing the node's driver.")
}

// syncInstanceName fills instance_name from instance_info.display_name when
// a patch changed instance_info and left instance_name unset, as Ironic
// does for clients (Nova) that only know display_name.
func syncInstanceName(old, n *proto.Node) {
	if n.InstanceName != nil && *n.InstanceName != "" || reflect.DeepEqual(old.InstanceInfo, n.InstanceInfo) {
		return
	}
	if name, _ := n.InstanceInfo["display_name"].(string); name != "" && len(name) <= maxInstanceNameLen {
		n.InstanceName = &name
	}
}

// checkDisableRamdisk applies Ironic's rule for disable_ramdisk on a
// provision request: manual clean from 1.70, service from 1.108 (406
// below), and no other verb (400).
func checkDisableRamdisk(minor int, req *proto.ProvisionRequest) error {
	if req.DisableRamdisk == nil {
		return nil
	}
	switch req.Target {
	case proto.VerbClean:
		if minor < 70 {
			return &Error{Code: http.StatusNotAcceptable, Msg: "disable_ramdisk is not acceptable in this API version"}
		}
	case proto.VerbService:
		if minor < 108 {
			return &Error{Code: http.StatusNotAcceptable, Msg: "disable_ramdisk is not acceptable in this API version"}
		}
	default:
		return badRequest("disable_ramdisk is supported only with manual cleaning or servicing")
	}
	return nil
}

// coerceBools turns the strings Ironic reads as booleans ("True", "off",
// "1" …) into JSON booleans for the boolean fields of v's struct, as
// Ironic's schemas accept them there: python-ironicclient sends
// "node set --protected" and "port set --pxe-enabled" as "True". Any other
// string is a 400 naming the field. Only nodes and ports: the schemas of
// Ironic's newer resources (runbooks' public, …) take JSON booleans only.
func coerceBools(obj map[string]json.RawMessage, v any) (map[string]json.RawMessage, error) {
	switch v.(type) {
	case *proto.Node, *proto.Port:
	default:
		return obj, nil
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return obj, nil
	}
	var out map[string]json.RawMessage
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() != reflect.Bool {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		raw, ok := obj[name]
		if !ok || len(raw) == 0 || raw[0] != '"' {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			continue
		}
		var b bool
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "t", "on", "y", "yes", "1":
			b = true
		case "false", "f", "off", "n", "no", "0":
		default:
			return nil, badRequest("Invalid value for %s: %q is not a boolean", name, truncate(s, 50))
		}
		if out == nil {
			out = maps.Clone(obj)
		}
		out[name] = json.RawMessage(strconv.FormatBool(b))
	}
	if out == nil {
		return obj, nil
	}
	return out, nil
}
