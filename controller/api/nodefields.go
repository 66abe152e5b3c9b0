package api

import (
	"reflect"

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
