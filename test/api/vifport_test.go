package api_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/portgroups"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
	"github.com/kilnhq/kiln/test/osctool"
)

// TestVIFTargetsOverHTTP attaches VIFs to a named port and port group
// (1.67) on a real kiln serve, with gophercloud's VirtualInterfaceOpts and
// `openstack baremetal node vif attach --port-uuid`, and checks where each
// was recorded.
func TestVIFTargetsOverHTTP(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	ctx := context.Background()
	c := newClient(t, k, "1.67")
	n, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "fake-hardware", Name: "v1"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	var groups, plain []string
	for i := range 2 {
		pg, err := portgroups.Create(ctx, c, portgroups.CreateOpts{NodeUUID: n.UUID, Name: fmt.Sprintf("bond%d", i)}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, pg.UUID)
		if _, err := ports.Create(ctx, c, ports.CreateOpts{NodeUUID: n.UUID, Address: fmt.Sprintf("52:54:00:00:08:1%d", i), PortGroupUUID: pg.UUID, PXEEnabled: ptr(false)}).Extract(); err != nil {
			t.Fatal(err)
		}
		p, err := ports.Create(ctx, c, ports.CreateOpts{NodeUUID: n.UUID, Address: fmt.Sprintf("52:54:00:00:08:2%d", i), PXEEnabled: ptr(false)}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		plain = append(plain, p.UUID)
	}
	// The second group and the second port: neither would be picked first.
	if err := nodes.AttachVirtualInterface(ctx, c, "v1", nodes.VirtualInterfaceOpts{ID: "vif-g", PortgroupUUID: groups[1]}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := nodes.AttachVirtualInterface(ctx, c, "v1", nodes.VirtualInterfaceOpts{ID: "vif-p", PortUUID: plain[1]}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if pg, err := portgroups.Get(ctx, c, groups[1]).Extract(); err != nil || pg.InternalInfo["tenant_vif_port_id"] != "vif-g" {
		t.Errorf("bond1: %+v %v", pg, err)
	}
	if p, err := ports.Get(ctx, c, plain[1]).Extract(); err != nil || p.InternalInfo["tenant_vif_port_id"] != "vif-p" {
		t.Errorf("second port: %+v %v", p, err)
	}
	// gophercloud refuses both itself; raw, Kiln answers Ironic's 400.
	code, _, b := k.call("POST", "/v1/nodes/v1/vifs", `{"id":"vif-x","port_uuid":"`+plain[0]+`","portgroup_uuid":"`+groups[0]+`"}`, "X-OpenStack-Ironic-API-Version", "1.67")
	if code != http.StatusBadRequest || faultstring(t, b) != "Cannot specify both port_uuid and portgroup_uuid" {
		t.Errorf("both: %d %s", code, b)
	}

	if why := osctool.Missing(); why != "" {
		t.Log(why + ": the client half is skipped")
		return
	}
	if out, code, err := osctool.Start(t, k.URL).Run("baremetal", "node", "vif", "attach", "v1", "vif-c", "--port-uuid", plain[0]); err != nil || code != 0 {
		t.Fatalf("openstack baremetal node vif attach --port-uuid: exit %d %v\n%s", code, err, out)
	}
	if p, err := ports.Get(ctx, c, plain[0]).Extract(); err != nil || p.InternalInfo["tenant_vif_port_id"] != "vif-c" {
		t.Errorf("first port after the client's attach: %+v %v", p, err)
	}
	vifs, err := nodes.ListVirtualInterfaces(ctx, c, "v1").Extract()
	var ids []string
	for _, v := range vifs {
		ids = append(ids, v.ID)
	}
	if err != nil || !slices.Equal(ids, []string{"vif-c", "vif-p", "vif-g"}) {
		t.Errorf("VIFs: %v %v", ids, err)
	}
}
