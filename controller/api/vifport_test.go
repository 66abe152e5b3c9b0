package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestVIFAttachToNamedTarget: a VIF attach naming port_uuid or
// portgroup_uuid (1.67) records the VIF there and not on the port group or
// PXE port Kiln would otherwise prefer; a target of another node, a port
// inside a group, a group with no free port or one that already carries a
// VIF is no free port (400); both at once are refused from 1.67 and below
// it port_uuid wins, as Ironic's conductor reads them from the VIF as sent.
func TestVIFAttachToNamedTarget(t *testing.T) {
	srv, _ := vifServer(t, -1)
	n := pgNode(t, srv, "n1")
	other := pgNode(t, srv, "n2")
	post := func(path, body string) string {
		return mustCall(t, srv, 201, "POST", path, "1.95", body)["uuid"].(string)
	}
	bond0 := post("/v1/portgroups", `{"node_uuid":"`+n+`","name":"bond0"}`)
	bond1 := post("/v1/portgroups", `{"node_uuid":"`+n+`","name":"bond1"}`)
	empty := post("/v1/portgroups", `{"node_uuid":"`+n+`","name":"empty"}`)
	plain := post("/v1/ports", `{"node_uuid":"`+n+`","address":"52:54:00:00:07:01","pxe_enabled":false}`)
	post("/v1/ports", `{"node_uuid":"`+n+`","address":"52:54:00:00:07:02"}`) // PXE: preferred over plain
	member0 := post("/v1/ports", `{"node_uuid":"`+n+`","address":"52:54:00:00:07:03","portgroup_uuid":"`+bond0+`","pxe_enabled":false}`)
	post("/v1/ports", `{"node_uuid":"`+n+`","address":"52:54:00:00:07:04","portgroup_uuid":"`+bond1+`","pxe_enabled":false}`)
	foreign := post("/v1/ports", `{"node_uuid":"`+other+`","address":"52:54:00:00:07:05"}`)

	vifOn := func(kind, id string) any {
		return mustCall(t, srv, 200, "GET", "/v1/"+kind+"/"+id, "1.95", "")["internal_info"].(map[string]any)["tenant_vif_port_id"]
	}
	// The plain port, though a group and a PXE port are free.
	mustCall(t, srv, 204, "POST", "/v1/nodes/n1/vifs", "1.67", `{"id":"vif-p","port_uuid":"`+plain+`"}`)
	if got := vifOn("ports", plain); got != "vif-p" {
		t.Errorf("port_uuid: the plain port carries %v", got)
	}
	// bond1, though bond0 comes first.
	mustCall(t, srv, 204, "POST", "/v1/nodes/n1/vifs", "1.67", `{"id":"vif-g","portgroup_uuid":"`+bond1+`"}`)
	if got := vifOn("portgroups", bond1); got != "vif-g" {
		t.Errorf("portgroup_uuid: bond1 carries %v", got)
	}
	if got := vifOn("portgroups", bond0); got != nil {
		t.Errorf("bond0 carries %v", got)
	}
	for _, c := range []struct {
		name, version, body string
		code                int
		fault               string
	}{
		{"port of another node", "1.67", `{"id":"vif-x","port_uuid":"` + foreign + `"}`, 400, "not enough free physical ports"},
		{"port in a group", "1.67", `{"id":"vif-x","port_uuid":"` + member0 + `"}`, 400, "not enough free physical ports"},
		{"port with a VIF", "1.67", `{"id":"vif-x","port_uuid":"` + plain + `"}`, 400, "not enough free physical ports"},
		{"the same VIF again", "1.67", `{"id":"vif-p","port_uuid":"` + plain + `"}`, 409, "already attached to Ironic Port " + plain},
		{"empty group", "1.67", `{"id":"vif-x","portgroup_uuid":"` + empty + `"}`, 400, "not enough free physical ports"},
		{"group with a VIF", "1.67", `{"id":"vif-x","portgroup_uuid":"` + bond1 + `"}`, 400, "not enough free physical ports"},
		{"unknown port", "1.67", `{"id":"vif-x","port_uuid":"00000000-0000-4000-8000-000000000000"}`, 400, "not enough free physical ports"},
		{"not a string", "1.67", `{"id":"vif-x","port_uuid":7}`, 400, "is not of type 'string'"},
		{"both", "1.67", `{"id":"vif-x","port_uuid":"` + plain + `","portgroup_uuid":"` + bond0 + `"}`, 400, "Cannot specify both port_uuid and portgroup_uuid"},
	} {
		code, body := call(t, srv, "POST", "/v1/nodes/n1/vifs", c.version, c.body)
		if code != c.code || !strings.Contains(ironicFault(t, body), c.fault) {
			t.Errorf("%s: %d %v, want %d %q", c.name, code, body, c.code, c.fault)
		}
	}
	if got := vifIDs(t, srv, "n1"); fmt.Sprint(got) != "[vif-p vif-g]" {
		t.Errorf("after the refusals: %v", got)
	}
	// Below 1.67 both are taken as Ironic's conductor takes them: the
	// port wins (here the port with a VIF: no free port), the group alone
	// is used.
	code, body := call(t, srv, "POST", "/v1/nodes/n1/vifs", "1.66", `{"id":"vif-y","port_uuid":"`+plain+`","portgroup_uuid":"`+bond0+`"}`)
	if code != 400 || !strings.Contains(ironicFault(t, body), "not enough free physical ports") {
		t.Errorf("both at 1.66: %d %v", code, body)
	}
	mustCall(t, srv, 204, "POST", "/v1/nodes/n1/vifs", "1.66", `{"id":"vif-y","portgroup_uuid":"`+bond0+`"}`)
	if got := vifOn("portgroups", bond0); got != "vif-y" {
		t.Errorf("portgroup_uuid at 1.66: bond0 carries %v", got)
	}
}
