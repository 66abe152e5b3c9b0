package api_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/portgroups"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// TestPortgroupsOverHTTP drives port groups, their ports and a node's VIFs
// on a real kiln serve with gophercloud (its portgroups, ports and node
// VIF clients) and raw HTTP where gophercloud has no call (PATCH of a
// group, the sub-collections), paging to the end through next.
func TestPortgroupsOverHTTP(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	ctx := context.Background()
	c := newClient(t, k, "1.95")

	// GET /v1/ links port groups from 1.23, as Ironic's root does.
	for v, want := range map[string]bool{"1.22": false, "1.23": true} {
		_, _, b := k.call("GET", "/v1/", "", "X-OpenStack-Ironic-API-Version", v)
		if got := strings.Contains(string(b), k.URL+"/v1/portgroups/"); got != want {
			t.Errorf("GET /v1/ at %s links portgroups: %v, want %v", v, got, want)
		}
	}
	var nodeIDs []string
	for _, name := range []string{"n1", "n2"} {
		n, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "fake-hardware", Name: name}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		nodeIDs = append(nodeIDs, n.UUID)
	}
	var created []string
	for i := range 5 {
		pg, err := portgroups.Create(ctx, c, portgroups.CreateOpts{NodeUUID: nodeIDs[i%2], Name: fmt.Sprintf("bond%d", i),
			Address: fmt.Sprintf("52:54:00:00:10:%02x", i), Mode: "802.3ad", StandalonePortsSupported: true,
			Properties: map[string]any{"miimon": "100"}, Extra: map[string]string{"rack": "r1"}}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		if pg.Mode != "802.3ad" || pg.Properties["miimon"] != "100" || pg.NodeUUID != nodeIDs[i%2] || len(pg.Ports) != 2 || !pg.StandalonePortsSupported {
			t.Errorf("created %+v", pg)
		}
		created = append(created, pg.UUID)
	}
	// Paging through gophercloud's pager (it follows next) with a node
	// filter, and raw to the end.
	var ofN1 []string
	err := portgroups.List(c, portgroups.ListOpts{Node: "n1", Limit: 2, Detail: true}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		pgs, err := portgroups.ExtractPortGroups(p)
		for _, pg := range pgs {
			ofN1 = append(ofN1, pg.UUID)
		}
		return true, err
	})
	if want := []string{created[0], created[2], created[4]}; err != nil || !slices.Equal(ofN1, want) {
		t.Errorf("gophercloud list of n1's groups: %v %v, want %v", ofN1, err, want)
	}
	var byName []string
	next := "/v1/portgroups?limit=2&sort_key=name&sort_dir=desc"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("no end to the pages")
		}
		code, _, b := k.call("GET", strings.TrimPrefix(next, k.URL), "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", next, code, b)
		}
		page := mustJSON(t, b)
		for _, pg := range page["portgroups"].([]any) {
			byName = append(byName, pg.(map[string]any)["name"].(string))
		}
		next, _ = page["next"].(string)
	}
	if want := []string{"bond4", "bond3", "bond2", "bond1", "bond0"}; !slices.Equal(byName, want) {
		t.Errorf("paged by name desc: %v", byName)
	}
	got, err := portgroups.Get(ctx, c, "bond1").Extract()
	if err != nil || got.UUID != created[1] || got.Address != "52:54:00:00:10:01" {
		t.Errorf("get by name: %+v %v", got, err)
	}

	// Ports join a group; the group lists them.
	var portIDs []string
	for i, mac := range []string{"52:54:00:00:20:01", "52:54:00:00:20:02"} {
		p, err := ports.Create(ctx, c, ports.CreateOpts{NodeUUID: nodeIDs[0], Address: mac, PortGroupUUID: created[0], PXEEnabled: ptr(i == 0)}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		if p.PortGroupUUID != created[0] {
			t.Errorf("port %s: portgroup_uuid %q", mac, p.PortGroupUUID)
		}
		portIDs = append(portIDs, p.UUID)
	}
	_, err = ports.Create(ctx, c, ports.CreateOpts{NodeUUID: nodeIDs[1], Address: "52:54:00:00:20:03", PortGroupUUID: created[0]}).Extract()
	wantStatus(t, err, http.StatusBadRequest)
	var members []string
	err = ports.List(c, ports.ListOpts{PortGroup: "bond0"}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		ps, err := ports.ExtractPorts(p)
		for _, port := range ps {
			members = append(members, port.UUID)
		}
		return true, err
	})
	if err != nil || !slices.Equal(members, portIDs) {
		t.Errorf("ports?portgroup=bond0: %v %v", members, err)
	}
	code, _, b := k.call("GET", "/v1/portgroups/"+created[0]+"/ports/detail", "")
	if code != http.StatusOK || len(mustJSON(t, b)["ports"].([]any)) != 2 {
		t.Errorf("ports of bond0: %d %s", code, b)
	}
	code, _, b = k.call("GET", "/v1/nodes/n2/portgroups?fields=name", "")
	if code != http.StatusOK || !strings.Contains(string(b), `"name":"bond1"`) || strings.Contains(string(b), "bond0") || strings.Contains(string(b), "address") {
		t.Errorf("n2's groups by name: %d %s", code, b)
	}
	code, _, b = k.call("GET", "/v1/nodes/n1", "")
	if code != http.StatusOK || !strings.Contains(string(b), k.URL+"/v1/nodes/"+nodeIDs[0]+"/portgroups") {
		t.Errorf("node links: %d %s", code, b)
	}
	code, _, b = k.call("PATCH", "/v1/portgroups/bond0", `[{"op":"replace","path":"/mode","value":"balance-rr"},{"op":"remove","path":"/extra/rack"}]`)
	if code != http.StatusOK || mustJSON(t, b)["mode"] != "balance-rr" || fmt.Sprint(mustJSON(t, b)["extra"]) != "map[]" {
		t.Errorf("patch: %d %s", code, b)
	}
	// Delete rules: not while ports are in it (400, Ironic's body).
	err = portgroups.Delete(ctx, c, "bond0").ExtractErr()
	wantStatus(t, err, http.StatusBadRequest)
	code, _, b = k.call("DELETE", "/v1/portgroups/bond0", "")
	if code != http.StatusBadRequest || !strings.Contains(faultstring(t, b), "contains ports") {
		t.Errorf("delete with ports: %d %s", code, b)
	}

	// VIFs: n1 has bond0 and its members only; the group takes the first
	// VIF and no port is left for a second (Ironic's 400).
	if err := nodes.AttachVirtualInterface(ctx, c, "n1", nodes.VirtualInterfaceOpts{ID: "vif-a"}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	err = nodes.AttachVirtualInterface(ctx, c, "n1", nodes.VirtualInterfaceOpts{ID: "vif-b"}).ExtractErr()
	wantStatus(t, err, http.StatusBadRequest)
	// Named, a member port takes one.
	if err := nodes.AttachVirtualInterface(ctx, c, "n1", nodes.VirtualInterfaceOpts{ID: "vif-b", PortUUID: portIDs[1]}).ExtractErr(); err == nil {
		t.Error("a VIF attached to a member of a group that has one")
	}
	vifs, err := nodes.ListVirtualInterfaces(ctx, c, "n1").Extract()
	if err != nil || len(vifs) != 1 || vifs[0].ID != "vif-a" {
		t.Errorf("VIFs of n1: %+v %v", vifs, err)
	}
	err = nodes.AttachVirtualInterface(ctx, c, "n1", nodes.VirtualInterfaceOpts{ID: "vif-a"}).ExtractErr()
	wantStatus(t, err, http.StatusConflict)
	if err := nodes.DetachVirtualInterface(ctx, c, "n1", "vif-a").ExtractErr(); err != nil {
		t.Fatal(err)
	}
	err = nodes.DetachVirtualInterface(ctx, c, "n1", "vif-a").ExtractErr()
	wantStatus(t, err, http.StatusBadRequest)
	if vifs, err := nodes.ListVirtualInterfaces(ctx, c, "n1").Extract(); err != nil || len(vifs) != 0 {
		t.Errorf("VIFs after detach: %+v %v", vifs, err)
	}
	old := newClient(t, k, "1.27")
	_, err = nodes.ListVirtualInterfaces(ctx, old, "n1").Extract()
	wantStatus(t, err, http.StatusNotFound)
	// Gating: mode hidden at 1.25, refused (406) when sent.
	code, _, b = k.call("GET", "/v1/portgroups/bond1", "", "X-OpenStack-Ironic-API-Version", "1.25")
	if code != http.StatusOK || strings.Contains(string(b), `"mode"`) {
		t.Errorf("bond1 at 1.25: %d %s", code, b)
	}
	if code, _, b := k.call("POST", "/v1/portgroups", `{"node_uuid":"`+nodeIDs[1]+`","mode":"802.3ad"}`, "X-OpenStack-Ironic-API-Version", "1.25"); code != http.StatusNotAcceptable {
		t.Errorf("mode at 1.25: %d %s", code, b)
	}
	if code, _, b := k.call("GET", "/v1/portgroups", "", "X-OpenStack-Ironic-API-Version", "1.22"); code != http.StatusNotFound || faultstring(t, b) == "" {
		t.Errorf("portgroups at 1.22: %d %s", code, b)
	}
	// A node's delete takes its groups and ports.
	if err := nodes.Delete(ctx, c, "n1").ExtractErr(); err != nil {
		t.Fatal(err)
	}
	_, err = portgroups.Get(ctx, c, created[0]).Extract()
	wantStatus(t, err, http.StatusNotFound)
	if err := portgroups.Delete(ctx, c, "bond1").ExtractErr(); err != nil {
		t.Errorf("delete of an empty group: %v", err)
	}
}

// TestPortgroupsOpenstackClient runs `openstack baremetal port group …`,
// `port create/list --port-group` and `node vif …` against a real kiln serve
// and checks what each prints.
func TestPortgroupsOpenstackClient(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	run, jsonOut := stepsOSC(t, k)
	var node map[string]any
	jsonOut(&node, "node", "create", "--driver", "fake-hardware", "--name", "n1")
	nodeID := node["uuid"].(string)
	var pg map[string]any
	jsonOut(&pg, "port", "group", "create", "--node", nodeID, "--name", "bond0", "--address", "52:54:00:00:30:01",
		"--mode", "802.3ad", "--property", "miimon=100", "--extra", "a=b", "--unsupport-standalone-ports")
	id, _ := pg["uuid"].(string)
	if id == "" || pg["name"] != "bond0" || pg["mode"] != "802.3ad" || fmt.Sprint(pg["properties"]) != "map[miimon:100]" ||
		pg["standalone_ports_supported"] != false || pg["node_uuid"] != nodeID {
		t.Fatalf("port group create printed %v", pg)
	}
	var list []map[string]any
	jsonOut(&list, "port", "group", "list")
	if len(list) != 1 || list[0]["UUID"] != id || list[0]["Name"] != "bond0" || list[0]["Address"] != "52:54:00:00:30:01" {
		t.Errorf("port group list: %v", list)
	}
	jsonOut(&list, "port", "group", "list", "--node", "n1", "--long")
	if len(list) != 1 || list[0]["Mode"] != "802.3ad" {
		t.Errorf("port group list --node --long: %v", list)
	}
	run(true, "port", "group", "set", "--mode", "balance-rr", "--extra", "c=d", "--support-standalone-ports", "bond0")
	run(true, "port", "group", "unset", "--extra", "a", "--property", "miimon", "bond0")
	var shown map[string]any
	jsonOut(&shown, "port", "group", "show", "bond0")
	if shown["mode"] != "balance-rr" || fmt.Sprint(shown["extra"]) != "map[c:d]" || fmt.Sprint(shown["properties"]) != "map[]" ||
		shown["standalone_ports_supported"] != true || shown["updated_at"] == nil {
		t.Errorf("port group show after set/unset: %v", shown)
	}
	var port map[string]any
	jsonOut(&port, "port", "create", "--node", nodeID, "--port-group", id, "52:54:00:00:30:02")
	if port["portgroup_uuid"] != id {
		t.Errorf("port create --port-group printed %v", port)
	}
	// The client lists a group's ports with port list --port-group.
	if out := run(true, "port", "list", "--port-group", "bond0", "-f", "value", "-c", "Address"); strings.TrimSpace(out) != "52:54:00:00:30:02" {
		t.Errorf("port list --port-group: %q", out)
	}
	if out := run(false, "port", "group", "delete", "bond0"); !strings.Contains(out, "contains ports. (HTTP 400)") {
		t.Errorf("port group delete with a port printed %q", out)
	}
	// VIFs: attach to the group, then to nothing left (400), list, detach.
	run(true, "node", "vif", "attach", "n1", "vif-1")
	if out := run(false, "node", "vif", "attach", "n1", "vif-2"); !strings.Contains(out, "not enough free physical ports. (HTTP 400)") {
		t.Errorf("vif attach with no free port printed %q", out)
	}
	if out := run(false, "node", "vif", "attach", "n1", "vif-1"); !strings.Contains(out, "is already attached to Ironic Portgroup "+id+" (HTTP 409)") {
		t.Errorf("vif attach again printed %q", out)
	}
	if out := run(true, "node", "vif", "list", "n1", "-f", "value"); strings.TrimSpace(out) != "vif-1" {
		t.Errorf("node vif list: %q", out)
	}
	jsonOut(&shown, "port", "group", "show", "bond0", "--fields", "internal_info")
	if fmt.Sprint(shown["internal_info"]) != "map[tenant_vif_port_id:vif-1]" {
		t.Errorf("group's internal_info after attach: %v", shown)
	}
	run(true, "node", "vif", "detach", "n1", "vif-1")
	if out := run(true, "node", "vif", "list", "n1", "-f", "value"); strings.TrimSpace(out) != "" {
		t.Errorf("node vif list after detach: %q", out)
	}
	if out := run(false, "node", "vif", "detach", "n1", "vif-1"); !strings.Contains(out, "because it is not attached to it. (HTTP 400)") {
		t.Errorf("vif detach of a detached VIF printed %q", out)
	}
	run(true, "port", "delete", port["uuid"].(string))
	if out := run(true, "port", "group", "delete", "bond0"); !strings.Contains(out, "Deleted port group bond0") {
		t.Errorf("port group delete printed %q", out)
	}
	if out := run(false, "port", "group", "show", id); !strings.Contains(out, "Portgroup "+id+" could not be found. (HTTP 404)") {
		t.Errorf("port group show of a deleted group printed %q", out)
	}
}
